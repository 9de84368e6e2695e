#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "autograd/threads.h"
#include "train/checkpoint.h"
#include "train/model_factory.h"
#include "train/study.h"
#include "train/text_file.h"

namespace ag {

namespace fs = std::filesystem;

nlohmann::json metrics_to_json(const MetricsRecord& r) {
  nlohmann::json j{{"step", r.step},
                   {"loss", r.loss},
                   {"lr", r.lr},
                   {"grad_norm", r.grad_norm},
                   {"tokens_per_s", r.tokens_per_s}};
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  if (r.eval_acc) j["eval_acc"] = *r.eval_acc;
  return j;
}

namespace {

// On resume, metrics logged after the checkpoint's step are dropped: the resumed run logs them again.
void truncate_metrics(const std::string& path, int64_t step) {
  std::string kept;
  if (!fs::exists(path)) return;
  for (const MetricsRecord& r : read_metrics_jsonl(path))
    if (r.step <= step) kept += metrics_to_json(r).dump() + "\n";
  write_text_file_atomically(path, kept);
}

bool every(int64_t step, int period) {
  return period > 0 && step % period == 0;
}

}  // namespace

TrainResult train_model(const Config& config, const TrainOptions& options) {
  set_num_threads(config.train.threads);
  const std::string& run = options.run_dir;
  TrainObserver fallback;
  TrainObserver& observer = options.observer ? *options.observer : fallback;

  const std::unique_ptr<Task> task = make_task(config.task);
  std::unique_ptr<nn::CausalLM<float>> model = make_model<float>(config);
  std::vector<OptimParam> params;
  for (auto& p : model->named_parameters()) params.push_back({p.name, p.tensor, uses_weight_decay(p.name)});
  AdamW optimizer(params, config.train.weight_decay);
  // The data stream is separate from the init stream, so changing the model does not change the data.
  Rng data_rng(config.seed * 0x9E3779B97F4A7C15ULL + 1);
  int64_t step = 0;

  fs::create_directories(run);
  const std::string metrics_path = run + "/metrics.jsonl";
  if (options.resume) {
    step = load_model_checkpoint(model_checkpoint_path(run), *model);
    load_optimizer_checkpoint(optimizer_checkpoint_path(run), optimizer, data_rng, step);
    truncate_metrics(metrics_path, step);
    observer.on_message("resuming " + run + " from step " + std::to_string(step));
  } else {
    std::error_code ignored;
    fs::remove(metrics_path, ignored);
  }
  write_text_file_atomically(run + "/config.json", to_json(config).dump(2) + "\n");

  const Batch eval_set = task->eval_set(config.seed, config.train.eval_size);
  const Study study(*task, config, eval_set);
  std::ofstream metrics(metrics_path, std::ios::app);
  if (!metrics) throw std::runtime_error(metrics_path + ": cannot open for writing");

  observer.on_start(config, step, model->parameter_count());
  if (!options.resume && config.output.attention_every > 0) study.dump_attention(*model, run, 0);

  const int B = config.train.batch_size, T = task->seq_len();
  TrainResult result;
  using clock = std::chrono::steady_clock;
  // tokens_per_s counts training steps only (sampling, forward, backward, clip, AdamW), not the evaluations,
  // dumps and checkpoints between them, so it is the number a benchmark would give.
  double window_seconds = 0;
  const auto run_start = clock::now();
  const int64_t first_step = step;
  int64_t window_steps = 0;
  while (step < config.train.steps) {
    if (options.stop && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    const auto step_start = clock::now();
    const Batch batch = task->sample(data_rng, B);
    const double lr = learning_rate(config.train, step);
    model->zero_grad();
    Tensor<float> logits = model->forward(batch.inputs, B, T);
    Tensor<float> loss = cross_entropy(logits, batch.targets, -1);
    const double loss_value = loss.item();
    if (!std::isfinite(loss_value))
      throw TrainingDiverged("loss became " + std::string(std::isnan(loss_value) ? "NaN" : "Inf") +
                             " at step " + std::to_string(step + 1) + "; the last good checkpoint is kept");
    loss.backward();
    const double grad_norm = clip_grad_norm(params, config.train.grad_clip);
    optimizer.step(lr);
    ++step;
    ++window_steps;
    result.last_loss = loss_value;

    window_seconds += std::chrono::duration<double>(clock::now() - step_start).count();
    MetricsRecord rec{
        step, loss_value, lr, grad_norm, window_steps * double(B) * T / std::max(window_seconds, 1e-9),
        {},   {}};
    if (every(step, config.train.eval_every) || step == config.train.steps) {
      const EvalResult e = evaluate(*model, eval_set);
      rec.eval_loss = e.loss;
      rec.eval_acc = e.acc;
      result.final_eval = e;
    }
    const double per_step =
        std::chrono::duration<double>(clock::now() - run_start).count() / (step - first_step);
    observer.on_step(rec, per_step * (config.train.steps - step));
    if (every(step, config.train.log_every) || rec.eval_acc || step == config.train.steps) {
      metrics << metrics_to_json(rec).dump() << "\n" << std::flush;
      observer.on_log(rec);
      window_seconds = 0;
      window_steps = 0;
    }
    if (every(step, config.output.attention_every)) study.dump_attention(*model, run, step);
    if (every(step, config.output.checkpoint_every) && step < config.train.steps)
      save_checkpoint(run, config, *model, optimizer, data_rng, step);
  }
  save_checkpoint(run, config, *model, optimizer, data_rng, step);
  result.step = step;
  if (!result.interrupted) {
    if (!every(step, config.output.attention_every)) study.dump_attention(*model, run, step);
    study.finish(*model, run, step, observer);
  }
  return result;
}

}  // namespace ag
