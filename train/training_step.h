// One optimisation step exactly as training runs it, shared by the trainer and `attograd bench`: the task's
// data stream, the model, AdamW and its schedule. A step is forward, cross-entropy, backward, global-norm
// clip and the AdamW update; drawing the batch is separate so a benchmark can time the step alone. Forward
// and backward run on train.shards shards of the batch at once (train/batch_shards.h).
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "autograd/random.h"
#include "nn/transformer.h"
#include "train/batch_shards.h"
#include "train/config.h"
#include "train/optimizer.h"
#include "train/tasks.h"

namespace train {

// The loss became NaN or Inf: the step stops before backward, so the parameters keep their last values.
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The generator of a config's data stream, seeded from config.seed apart from the init stream so that
// changing the model does not change the data: training_batch(step, ...) with it draws the trainer's batches.
ag::Rng data_rng(const Config& config);

class TrainingStep {
 public:
  // Builds the task, the model (seeded with config.seed), AdamW and the data stream; threads are the
  // caller's (ag::set_num_threads). With with_optimizer false, no optimiser state is allocated: only
  // forward() may be used (a forward-pass benchmark).
  explicit TrainingStep(const Config& config, bool with_optimizer = true);

  // The batch of 0-based step `step`: batch_size sequences of the data stream, or a finite dataset's
  // (train/task.h).
  Batch next_batch(int64_t step);

  struct Result {
    double loss = 0, grad_norm = 0, lr = 0;
  };
  // One update on `batch` at 0-based step `step` (it sets the learning rate); throws TrainingDiverged.
  Result run(const Batch& batch, int64_t step);

  // The logits (B, T, V) of `batch` with no graph recorded.
  ag::Tensor<float> forward(const Batch& batch) const;

  const Config& config() const { return config_; }
  const Task& task() const { return *task_; }
  nn::CausalLM<float>& model() { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  ag::Rng& data_rng() { return data_rng_; }  // saved in checkpoints, so a resumed run draws the same data

 private:
  Config config_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<nn::CausalLM<float>> model_;
  std::vector<OptimParam> params_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<BatchShards> shards_;  // only with an optimiser
  ag::Rng data_rng_;
};

}  // namespace train
