#include "train/trainer.h"

#include <chrono>
#include <filesystem>

#include "autograd/threads.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "train/checkpoint.h"

namespace train {

namespace fs = std::filesystem;

namespace {

// RUN/split.json for a finite dataset: the names of the sequences trained on and held out.
void write_split(const Task& task, const std::string& run) {
  if (!task.finite()) return;
  const nlohmann::json split = {
      {"id", task.split_id_meaning()}, {"train", task.split_ids(false)}, {"heldout", task.split_ids(true)}};
  io::write_text_file_atomically(io::layout::split_json(run), split.dump() + "\n");
}

// Calls `fn` on every observer, in order.
template <typename Fn>
void notify(const TrainOptions& options, Fn fn) {
  for (TrainObserver* o : options.observers) fn(*o);
}

}  // namespace

TrainResult train_model(const Config& config, const TrainOptions& options) {
  ag::set_num_threads(config.train.threads);
  const std::string& run = options.run_dir;
  TrainingStep trainer(config);
  nn::CausalLM<float>& model = trainer.model();
  int64_t step = 0;
  // Before anything is written: a model.init_from that does not fit is the config's error.
  if (!options.resume && !config.model.init_from.empty()) init_from_run(config, model);

  fs::create_directories(run);
  // A writer killed mid-write leaves its temporary file (io::AtomicFile names them PATH.tmp.PID.N); they
  // go before the run continues, from the run's own folders only.
  io::remove_stale_temp_files(run);
  const std::string metrics_path = io::layout::metrics_jsonl(run);
  if (options.resume) {
    step = load_model_checkpoint(io::layout::model_checkpoint(run), model);
    load_optimizer_checkpoint(io::layout::optimizer_checkpoint(run, step), trainer.optimizer(),
                              trainer.data_rng(), step);
    truncate_metrics_jsonl(metrics_path, step);
    notify(options,
           [&](TrainObserver& o) { o.on_message("resuming " + run + " from step " + std::to_string(step)); });
  } else {
    std::error_code ignored;
    fs::remove(metrics_path, ignored);
    if (!config.model.init_from.empty())
      notify(options, [&](TrainObserver& o) {
        o.on_message("starting from the weights of " + config.model.init_from);
      });
  }
  io::write_text_file_atomically(io::layout::config_json(run), to_json(config).dump(2) + "\n");
  write_split(trainer.task(), run);

  const Batch eval_set = trainer.task().eval_set(config.seed, config.train.eval_size);
  MetricsAppender metrics(metrics_path);

  notify(options, [&](TrainObserver& o) { o.on_start(config, step, model.parameter_count()); });
  if (!options.resume) notify(options, [&](TrainObserver& o) { o.on_model(model, step, false); });
  // A model that starts from another run's weights has a held-out loss worth knowing before any step: the
  // line of step 0 (its loss is the held-out loss, lr 0: no step was taken).
  if (!options.resume && !config.model.init_from.empty()) {
    const EvalResult e = evaluate(model, eval_set);
    const MetricsRecord start{0, e.loss, 0, 0, 0, e.loss, e.acc};
    metrics.append(start);
    notify(options, [&](TrainObserver& o) { o.on_log(start); });
  }

  TrainResult result;
  using clock = std::chrono::steady_clock;
  // tokens_per_s counts training steps only (sampling, forward, backward, clip, AdamW), not the evaluations,
  // dumps and checkpoints between them, so it is the number a benchmark would give.
  double window_seconds = 0;
  const auto run_start = clock::now();
  const int64_t first_step = step;
  double window_tokens = 0;
  while (step < config.train.steps) {
    if (options.stop && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    const auto step_start = clock::now();
    TrainingStep::Result r;
    Batch batch;
    try {
      batch = trainer.next_batch(step);
      r = trainer.run(batch, step);
    } catch (const TrainingDiverged& e) {
      throw TrainingDiverged(std::string(e.what()) + "; the last good checkpoint is kept");
    }
    ++step;
    window_tokens += double(batch.B) * batch.T;
    result.last_loss = r.loss;

    window_seconds += std::chrono::duration<double>(clock::now() - step_start).count();
    MetricsRecord rec{step, r.loss, r.lr, r.grad_norm, window_tokens / std::max(window_seconds, 1e-9),
                      {},   {}};
    if (every(step, config.train.eval_every) || step == config.train.steps) {
      const EvalResult e = evaluate(model, eval_set);
      rec.eval_loss = e.loss;
      rec.eval_acc = e.acc;
      result.final_eval = e;
    }
    const double per_step =
        std::chrono::duration<double>(clock::now() - run_start).count() / (step - first_step);
    notify(options, [&](TrainObserver& o) { o.on_step(rec, per_step * (config.train.steps - step)); });
    if (every(step, config.train.log_every) || rec.eval_acc || step == config.train.steps) {
      metrics.append(rec);
      notify(options, [&](TrainObserver& o) { o.on_log(rec); });
      window_seconds = 0;
      window_tokens = 0;
    }
    notify(options, [&](TrainObserver& o) { o.on_model(model, step, false); });
    if (every(step, config.output.checkpoint_every) && step < config.train.steps)
      save_checkpoint(run, config, model, trainer.optimizer(), trainer.data_rng(), step);
  }
  save_checkpoint(run, config, model, trainer.optimizer(), trainer.data_rng(), step);
  result.step = step;
  if (!result.interrupted) notify(options, [&](TrainObserver& o) { o.on_model(model, step, true); });
  return result;
}

}  // namespace train
