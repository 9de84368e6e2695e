#include "train/training_step.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "train/model_factory.h"

namespace train {

namespace {
std::vector<OptimParam> optim_params(nn::CausalLM<float>& model, const TrainConfig& train) {
  std::vector<OptimParam> params;
  for (auto& p : model.named_parameters())
    params.push_back({p.name, p.tensor, uses_weight_decay(p.kind, train.decay),
                      train.optimizer == "muon" && is_muon_matrix(p.name, p.kind, p.tensor->dim())});
  return params;
}
}  // namespace

ag::Rng data_rng(const Config& config) {
  return ag::Rng(config.seed * 0x9E3779B97F4A7C15ULL + 1);
}

TrainingStep::TrainingStep(const Config& config, bool with_optimizer)
    : config_(config),
      task_(make_task(config.task, config.seed)),
      model_(make_model<float>(config)),
      params_(optim_params(*model_, config.train)),
      optimizer_(with_optimizer ? std::make_unique<AdamW>(params_, config.train.weight_decay,
                                                          config.train.betas[0], config.train.betas[1])
                                : nullptr),
      shards_(with_optimizer
                  ? std::make_unique<BatchShards>(*model_, config.train.shards, config.train.scored_rows_only)
                  : nullptr),
      data_rng_(train::data_rng(config)) {
  // The config was resolved from the task's data when it was read (model.vocab, model.max_len); a data file
  // changed since then (appended to while the command starts) would give ids or lengths the model lacks.
  const Task& task = *task_;
  const bool resolved = config.model.vocab > 0 && config.model.max_len > 0;
  if (resolved && (task.vocab_size() > config.model.vocab || task.seq_len() > config.model.max_len))
    throw std::runtime_error(
        (config.task.path.empty() ? "task " + config.task.kind : "task.path " + config.task.path) +
        ": changed after the config was read (now " + std::to_string(task.vocab_size()) +
        " tokens and sequences of " + std::to_string(task.seq_len()) + ", the model takes " +
        std::to_string(config.model.vocab) + " and " + std::to_string(config.model.max_len) +
        "); run again once the file is complete");
}

Batch TrainingStep::next_batch(int64_t step) {
  return task_->training_batch(step, config_.train.batch_size, data_rng_);
}

ag::Tensor<float> TrainingStep::forward(const Batch& batch) const {
  ag::NoGradScope no_grad;
  return model_->forward(batch.inputs, batch.B, batch.T);
}

TrainingStep::Result TrainingStep::run(const Batch& batch, int64_t step) {
  if (!optimizer_) throw std::logic_error("TrainingStep::run: built without an optimiser");
  Result r;
  r.lr = learning_rate(config_.train, step);
  r.loss = shards_->forward_backward(batch);
  if (!std::isfinite(r.loss))
    throw TrainingDiverged("loss became " + std::string(std::isnan(r.loss) ? "NaN" : "Inf") + " at step " +
                           std::to_string(step + 1));
  r.grad_norm = grad_norm(params_);
  // Muon's rate follows train.lr's schedule (warmup and decay scale both alike).
  optimizer_->step(r.lr, clip_factor(r.grad_norm, config_.train.grad_clip),
                   r.lr / config_.train.lr * config_.train.muon_lr);
  return r;
}

}  // namespace train
