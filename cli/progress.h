// Training progress for people: on a terminal, one line redrawn in place (step/total, loss, accuracy,
// tokens/s, ETA); elsewhere (a pipe, CI, a log file) plain lines every log_every steps.
#pragma once

#include <chrono>
#include <cstdio>

#include "train/trainer.h"

namespace cli {

class Progress : public train::TrainObserver {
 public:
  explicit Progress(std::FILE* out);
  void on_start(const train::Config& config, int64_t first_step, int64_t params) override;
  void on_step(const train::MetricsRecord& r, double eta_seconds) override;
  void on_log(const train::MetricsRecord& r) override;
  void on_message(const std::string& text) override;
  void finish_line();  // ends the redrawn line before other output

 private:
  std::FILE* out_;
  bool tty_;
  int64_t total_ = 0;
  double last_acc_ = -1;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace cli
