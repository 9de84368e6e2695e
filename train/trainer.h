// The training loop: a config in, a run folder out (docs/architecture.md "The run folder"). It runs
// TrainingStep, logs metrics.jsonl, evaluates on held-out sequences, writes checkpoints, and resumes
// bit-exactly from one. It knows no command line and draws no picture: progress, and the model between
// steps for the study of the run (attention dumps, scores, report), go to TrainObservers; a stop request
// (Ctrl-C) arrives through an atomic flag.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "nn/transformer.h"
#include "train/config.h"
#include "train/evaluate.h"
#include "train/metrics_log.h"
#include "train/training_step.h"

namespace train {

// True when `step` falls on a period of `period` steps (never for period 0, which switches it off): when the
// run logs, evaluates, checkpoints and dumps attention maps.
inline bool every(int64_t step, int period) {
  return period > 0 && step % period == 0;
}

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const Config& /*config*/, int64_t /*first_step*/, int64_t /*params*/) {}
  // After every step, with the running numbers (eval fields set at eval steps).
  virtual void on_step(const MetricsRecord& /*running*/, double /*eta_seconds*/) {}
  // At log_every steps and at the end: what was appended to metrics.jsonl.
  virtual void on_log(const MetricsRecord&) {}
  virtual void on_message(const std::string&) {}
  // The model as it is: at the start of a fresh run (step 0), after every step, and once more when the
  // run has reached train.steps (finished = true; not when it was stopped).
  virtual void on_model(const nn::CausalLM<float>& /*model*/, int64_t /*step*/, bool /*finished*/) {}
};

struct TrainOptions {
  std::string run_dir;
  bool resume = false;                      // continue from run_dir's checkpoint
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT): checkpoint at the current step and return
  std::vector<TrainObserver*> observers;    // called in this order
};

struct TrainResult {
  int64_t step = 0;  // steps completed
  bool interrupted = false;
  double last_loss = 0;
  std::optional<EvalResult> final_eval;
};

// Throws TrainingDiverged (the loss became NaN or Inf; the last good checkpoint is kept).
TrainResult train_model(const Config& config, const TrainOptions& options);

}  // namespace train
