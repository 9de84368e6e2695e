// The training loop: a config in, a run folder out (DESIGN.md "The run folder"). It samples batches from the
// task, runs forward/backward, clips, steps AdamW, logs metrics.jsonl, evaluates on held-out sequences,
// dumps attention maps, writes checkpoints, and resumes bit-exactly from one. It knows no command line:
// progress goes to a TrainObserver, and a stop request (Ctrl-C) arrives through an atomic flag.
#pragma once

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>

#include "train/config.h"
#include "train/evaluate.h"
#include "train/report_html.h"

namespace ag {

// One line of RUN/metrics.jsonl (MetricsRecord is in report_html.h, which reads them back).
nlohmann::json metrics_to_json(const MetricsRecord& r);

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const Config& /*config*/, int64_t /*first_step*/, int64_t /*params*/) {}
  // After every step, with the running numbers (eval fields set at eval steps).
  virtual void on_step(const MetricsRecord& /*running*/, double /*eta_seconds*/) {}
  // At log_every steps and at the end: what was appended to metrics.jsonl.
  virtual void on_log(const MetricsRecord&) {}
  virtual void on_message(const std::string&) {}
};

struct TrainOptions {
  std::string run_dir;
  bool resume = false;                      // continue from run_dir's checkpoint
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT): checkpoint at the current step and return
  TrainObserver* observer = nullptr;
};

struct TrainResult {
  int64_t step = 0;  // steps completed
  bool interrupted = false;
  double last_loss = 0;
  std::optional<EvalResult> final_eval;
};

// The loss became NaN or Inf: the run stops without a checkpoint of the bad state.
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

TrainResult train_model(const Config& config, const TrainOptions& options);

}  // namespace ag
