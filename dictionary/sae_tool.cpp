#include "dictionary/sae_tool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/run_study.h"
#include "autograd/threads.h"
#include "dictionary/sae_eval.h"
#include "dictionary/sae_source.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/model_view.h"
#include "train/safetensors.h"
#include "train/training_step.h"

namespace dictionary {

namespace {

SaeConfig read_config(const std::string& path) {
  if (path.empty()) return SaeConfig{};
  return load_sae_config(path);
}

}  // namespace

namespace {

int64_t shown_params(const SaeTrainer& t) {
  return t.params().W_enc.numel() * 2 + t.params().d_in() + t.params().d_sae();
}
int64_t shown_params(const CltTrainer& t) {
  return t.n_params();
}
SaeTrainer::StepResult step_on(SaeTrainer& t, const DictBatch& b) {
  return b.y.defined() ? t.step(b.x, b.y) : t.step(b.x);
}
SaeTrainer::StepResult step_on(CltTrainer& t, const DictBatch& b) {
  return t.step(b.x, b.y);
}

template <typename Trainer>
bool train_loop(Trainer& trainer, const std::function<DictBatch(int64_t step)>& source,
                const std::string& name, const std::string& checkpoint,
                const std::map<std::string, std::string>& metadata, train::TrainObserver* progress,
                const std::atomic<bool>* stop) {
  const SaeConfig& c = trainer.config();
  if (progress) {
    train::Config shown;
    shown.name = name;
    shown.task.kind = "sae";
    shown.train.steps = static_cast<int>(c.steps);
    shown.train.threads = ag::num_threads();
    progress->on_start(shown, trainer.steps_done(), shown_params(trainer));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = trainer.steps_done();
  while (trainer.steps_done() < c.steps) {
    if (stop && stop->load()) {
      if (!checkpoint.empty()) trainer.save_checkpoint(checkpoint, metadata);
      return false;
    }
    const int64_t step = trainer.steps_done();
    const DictBatch batch = source(step);
    const SaeTrainer::StepResult r = step_on(trainer, batch);
    if (!std::isfinite(r.loss))
      throw train::TrainingDiverged("sae: the loss became " + std::to_string(r.loss) + " at step " +
                                    std::to_string(step));
    if (progress) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      train::MetricsRecord m;
      m.step = step + 1;
      m.loss = r.loss;
      m.lr = c.lr;
      m.tokens_per_s = (step + 1 - first) * static_cast<double>(c.batch_size) / std::max(s, 1e-9);
      progress->on_step(m, s / (step + 1 - first) * (c.steps - step - 1));
      if ((step + 1) % 100 == 0 || step + 1 == c.steps) progress->on_log(m);
    }
    if (!checkpoint.empty() && ((step + 1) % c.checkpoint_every == 0 || step + 1 == c.steps))
      trainer.save_checkpoint(checkpoint, metadata);
  }
  return true;
}

}  // namespace

bool train_dictionary(SaeTrainer& trainer, const std::function<DictBatch(int64_t step)>& source,
                      const std::string& name, const std::string& checkpoint,
                      const std::map<std::string, std::string>& metadata, train::TrainObserver* progress,
                      const std::atomic<bool>* stop) {
  return train_loop(trainer, source, name, checkpoint, metadata, progress, stop);
}

bool train_dictionary(CltTrainer& trainer, const std::function<DictBatch(int64_t step)>& source,
                      const std::string& name, const std::string& checkpoint,
                      const std::map<std::string, std::string>& metadata, train::TrainObserver* progress,
                      const std::atomic<bool>* stop) {
  return train_loop(trainer, source, name, checkpoint, metadata, progress, stop);
}

namespace {

// The activation scale as sae.safetensors's metadata shows it: 9 significant digits (a float's).
std::string scale_to_metadata(float scale) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(scale));
  return buf;
}

findings::SaeEvalSummary summary_of(const std::string& point, const SaeEval& e, int64_t d_in, int64_t d_sae) {
  findings::SaeEvalSummary s;
  s.point = point;
  s.d_in = d_in;
  s.d_sae = d_sae;
  s.tokens = e.tokens;
  s.mse = e.mse;
  s.explained_variance = e.explained_variance;
  s.l0 = e.l0;
  s.dead = e.dead;
  s.density_bins = findings::sae_density_bins();
  s.density_counts = e.density_histogram;
  s.ce_clean = e.ce_clean;
  s.ce_with_sae = e.ce_with_sae;
  s.ce_zero_ablation = e.ce_zero_ablation;
  s.ce_loss_recovered = e.ce_loss_recovered;
  s.kl = e.kl;
  return s;
}

}  // namespace

analysis::Output<SaeOutcome> sae(analysis::StudyRun& run, const SaeRequest& request) {
  if (request.point.empty())
    throw analysis::RequestError("point: expected a hook point, e.g. blocks.0.mlp.post");
  if (request.resume && !request.config.empty())
    throw analysis::RequestError("resume: continues with the checkpoint's own config; leave out config");
  const std::vector<std::string> points = run.model->hook_points();
  if (std::find(points.begin(), points.end(), request.point) == points.end())
    throw analysis::RequestError(
        "point " + request.point + ": not a hook point of this model (e.g. blocks.0.resid_post" +
        (nn::view(*run.model).layers[0].has_mlp ? std::string(", blocks.0.mlp.post") : std::string()) + ")");
  SaeConfig config = read_config(request.config);
  const bool in_run = request.out.empty();
  const std::string out = in_run ? io::layout::sae_dir(run.dir, request.point) : request.out;
  std::optional<io::RunLock> lock;
  if (in_run) {
    lock.emplace(run.dir);                     // one writer per run folder
    io::check_folder_below_run(run.dir, out);  // nothing written through a link planted in the run
  }
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw analysis::RequestError("out " + out + ": exists and is not a folder");
  const std::string checkpoint = io::layout::sae_checkpoint(out);
  if (request.resume) {
    const train::SafetensorsFile header = train::read_safetensors_header(checkpoint);
    const nlohmann::json saved =
        io::parse_json(train::metadata_string(header, "config", checkpoint), checkpoint + " (config)");
    config = sae_config_from_json(saved, checkpoint + " (config)");
    // A checkpoint from before normalisation trained on raw activations.
    if (saved.is_object() && !saved.contains("normalize_activations"))
      config.normalize_activations = SaeNormalize::none;
  }
  if (config.skip)
    throw analysis::RequestError("config: skip is a transcoder's (attograd transcoder), not an SAE's");

  // Every output checked before the training, so that a bad one fails first, in one line: each file of
  // the folder must be absent or a regular file, and the run's report must still read every file it shows.
  for (const std::string& file : {io::layout::sae_model(out), checkpoint, io::layout::sae_eval_json(out),
                                  io::layout::sae_features_json(out), io::layout::sae_features_html(out)})
    io::check_replaceable(file);
  if (in_run) analysis::check_run_report(run.dir, out);

  ModelActivations source(*run.model, *run.task, request.point, config);
  std::filesystem::create_directories(out);  // once the point is known to be one an SAE can read
  // On resume the scale is the checkpoint's.
  const bool normalize = !request.resume && config.normalize_activations != SaeNormalize::none;
  SaeTrainer trainer(config, source.d_in(), request.resume ? std::vector<float>{} : source.mean(),
                     normalize ? source.norm_scale() : 1.f);
  if (request.resume) trainer.load_checkpoint(checkpoint);
  std::map<std::string, std::string> metadata = {{"config", sae_config_to_json(config).dump()},
                                                 {"hook_name", request.point},
                                                 {"d_in", std::to_string(source.d_in())},
                                                 {"d_sae", std::to_string(trainer.params().d_sae())},
                                                 {"run", run.dir}};
  analysis::Output<SaeOutcome> result;
  const bool finished = train_dictionary(
      trainer,
      [&](int64_t step) {
        return DictBatch{source.batch(step), {}};
      },
      "sae " + request.point, checkpoint, metadata, request.progress, request.stop);
  result.result.steps = trainer.steps_done();
  if (!finished) {
    result.result.stopped = true;
    result.wrote = {checkpoint};
    return result;
  }
  // Evaluated as saved: the scale folded in, on raw activations (the same as the trained SAE on scaled
  // activations, up to rounding).
  const SaeParams<float> raw = trainer.raw_params();
  metadata["activation_scale"] = scale_to_metadata(trainer.activation_scale());
  const train::Batch held_out = run.task->eval_set(run.config.seed, config.eval_sequences);
  std::vector<findings::SaeFeature> features;
  const SaeEval e = evaluate_sae(*run.model, *run.task, raw, config, request.point, held_out, &features);
  result.result.eval = summary_of(request.point, e, source.d_in(), trainer.params().d_sae());
  result.wrote =
      save_sae(in_run ? run.dir : std::string(), out,
               run.config.name + ", step " + std::to_string(run.step) + ": SAE at " + request.point, raw,
               metadata, result.result.eval, features, run.config.name);
  return result;
}

std::vector<std::string> save_sae(const std::string& run, const std::string& folder, const std::string& title,
                                  const SaeParams<float>& params,
                                  const std::map<std::string, std::string>& metadata,
                                  const findings::SaeEvalSummary& eval,
                                  const std::vector<findings::SaeFeature>& features,
                                  const std::string& run_name) {
  write_sae_file(io::layout::sae_model(folder), params, metadata);
  const nlohmann::json ej = findings::sae_eval_to_json(eval);
  io::write_text_file_atomically(io::layout::sae_eval_json(folder), ej.dump(1) + "\n");
  io::write_text_file_atomically(io::layout::sae_features_json(folder),
                                 findings::sae_features_to_json(features).dump() + "\n");
  io::write_text_file_atomically(io::layout::sae_features_html(folder),
                                 findings::sae_features_html(title, ej, features));
  std::vector<std::string> wrote = {io::layout::sae_model(folder), io::layout::sae_checkpoint(folder),
                                    io::layout::sae_eval_json(folder), io::layout::sae_features_json(folder),
                                    io::layout::sae_features_html(folder)};
  if (!run.empty()) {
    analysis::write_run_report(run, run_name);  // its "Sparse autoencoders" section
    wrote.push_back(io::layout::report_html(run));
  }
  return wrote;
}

analysis::Output<findings::SaeSyntheticResult> sae_synthetic(const SaeSyntheticRequest& request) {
  if (request.sae_features < request.features)
    throw analysis::RequestError("sae_features " + std::to_string(request.sae_features) +
                                 ": expected at least features (" + std::to_string(request.features) + ")");
  SaeConfig config = read_config(request.config);
  if (request.config.empty()) {
    // Defaults for the synthetic source: TopK near its expected L0 (features x p, 5.1 for the defaults).
    config.activation = SaeActivation::topk;
    config.k = 6;
    config.lr = 3e-3;
  }
  config.d_sae = request.sae_features;
  config.seed = request.seed;
  const auto t0 = std::chrono::steady_clock::now();
  const SyntheticFeatures source(request.features, request.dim, request.p, request.seed);
  // The scale from a stream of its own (step -1), as many rows as a buffer.
  const float scale =
      config.normalize_activations == SaeNormalize::none
          ? 1.f
          : activation_scale(source.batch(-1, std::min<int64_t>(config.buffer_tokens, 65536)).to_vector(),
                             request.dim);
  SaeTrainer trainer(config, request.dim, std::vector<float>(static_cast<size_t>(request.dim), 0.f), scale);
  train_dictionary(
      trainer,
      [&](int64_t step) {
        return DictBatch{source.batch(step, config.batch_size), {}};
      },
      "sae synthetic", "", {}, request.progress, nullptr);
  // Evaluation on samples of a stream the training never saw.
  const int64_t N = 16384;
  std::vector<float> truth;
  const ag::Tensor<float> x = source.batch(-2, N, &truth);
  ag::NoGradScope no_grad;
  const SaeOutput<float> o = sae_forward(trainer.raw_params(), x, config.activation, 0.f, config.k);
  const int64_t M = trainer.params().d_sae();
  double l0 = 0;
  std::vector<char> alive(static_cast<size_t>(M), 0);
  for (int64_t i = 0; i < N * M; ++i)
    if (o.f.data()[i] > 0) {
      l0 += 1;
      alive[i % M] = 1;
    }
  analysis::Output<findings::SaeSyntheticResult> out;
  findings::SaeSyntheticResult& r = out.result;
  r.features = request.features;
  r.dim = request.dim;
  r.p = request.p;
  r.d_sae = M;
  r.steps = config.steps;
  r.mean_max_cos = mean_max_cos(source.directions(), trainer.params().W_dec.to_vector(), request.dim);
  r.mcc = mcc(truth, request.features, o.f.to_vector(), M, N);
  r.l0 = l0 / N;
  r.dead = M - std::count(alive.begin(), alive.end(), 1);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace dictionary
