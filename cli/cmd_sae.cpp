// attograd sae RUN_DIR --at POINT [--config SAE.json] [--out DIR] [--resume] [--json]: a sparse
// autoencoder trained on a model's activations at a hook point (study/sae.h), evaluated on held-out
// sequences (study/sae_eval.h), and written as DIR/sae.safetensors, eval.json, features.json and
// features.html. attograd sae synthetic [...]: the same SAE on a source with known features, and how well
// it recovers them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "autograd/threads.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/stop_signal.h"
#include "findings/sae_view.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/run_study.h"
#include "study/sae.h"
#include "study/sae_eval.h"
#include "study/sae_source.h"
#include "study/tool.h"
#include "train/safetensors.h"
#include "train/trainer.h"

namespace cli {

namespace {

using json = nlohmann::json;

struct Args {
  std::string run, at, config, out;
  bool json = false, resume = false;
  // synthetic
  int64_t features = 256, dim = 32, sae_features = 512;
  double p = 0.02;
  uint64_t seed = 1;
};

study::SaeConfig read_config(const std::string& path) {
  if (path.empty()) return study::SaeConfig{};
  return study::load_sae_config(path);
}

// Trains `trainer` to its config's steps on source(step), with the progress line; checkpoints to
// `checkpoint` (when not empty) every checkpoint_every steps and at the end. When `stop` is set (Ctrl-C),
// it checkpoints at the current step and returns false; true when the config's steps are done.
template <typename Source>
bool train_sae(study::SaeTrainer& trainer, Source&& source, const std::string& name,
               const std::string& checkpoint, const std::map<std::string, std::string>& metadata, bool quiet,
               const std::atomic<bool>* stop = nullptr) {
  const study::SaeConfig& c = trainer.config();
  Progress progress(stderr);
  train::Config shown;
  shown.name = name;
  shown.task.kind = "sae";
  shown.train.steps = static_cast<int>(c.steps);
  shown.train.threads = ag::num_threads();
  if (!quiet)
    progress.on_start(
        shown, trainer.steps_done(),
        trainer.params().W_enc.numel() * 2 + trainer.params().d_in() + trainer.params().d_sae());
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = trainer.steps_done();
  while (trainer.steps_done() < c.steps) {
    if (stop && stop->load()) {
      if (!checkpoint.empty()) trainer.save_checkpoint(checkpoint, metadata);
      if (!quiet) progress.finish_line();
      return false;
    }
    const int64_t step = trainer.steps_done();
    const study::SaeTrainer::StepResult r = trainer.step(source(step));
    if (!std::isfinite(r.loss))
      throw train::TrainingDiverged("sae: the loss became " + std::to_string(r.loss) + " at step " +
                                    std::to_string(step));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train::MetricsRecord m;
    m.step = step + 1;
    m.loss = r.loss;
    m.lr = c.lr;
    m.tokens_per_s = (step + 1 - first) * static_cast<double>(c.batch_size) / std::max(s, 1e-9);
    const double eta = s / (step + 1 - first) * (c.steps - step - 1);
    if (!quiet) {
      progress.on_step(m, eta);
      if ((step + 1) % 100 == 0 || step + 1 == c.steps) progress.on_log(m);
    }
    if (!checkpoint.empty() && ((step + 1) % c.checkpoint_every == 0 || step + 1 == c.steps))
      trainer.save_checkpoint(checkpoint, metadata);
  }
  if (!quiet) progress.finish_line();
  return true;
}

json eval_to_json(const std::string& point, const study::SaeEval& e, int64_t d_in, int64_t d_sae) {
  return json{
      {"point", point},
      {"d_in", d_in},
      {"d_sae", d_sae},
      {"tokens", e.tokens},
      {"mse", e.mse},
      {"explained_variance", e.explained_variance},
      {"l0", e.l0},
      {"dead", e.dead},
      {"density_histogram",
       {{"bins",
         {"dead", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)", "[1e-2,1e-1)", "[1e-1,1]"}},
        {"counts", e.density_histogram}}},
      {"ce_clean", e.ce_clean},
      {"ce_with_sae", e.ce_with_sae},
      {"ce_zero_ablation", e.ce_zero_ablation},
      {"ce_loss_recovered", e.ce_loss_recovered},
      {"kl", e.kl}};
}

int run_sae(const Args& a) {
  if (a.run.empty()) throw UsageError("sae: give RUN_DIR (or: sae synthetic)");
  if (a.at.empty()) throw UsageError("sae: --at POINT is required (e.g. --at blocks.0.mlp.post)");
  if (a.resume && !a.config.empty())
    throw UsageError("--resume continues with the checkpoint's own config; leave out --config");
  study::SaeConfig config = read_config(a.config);
  train::LoadedRun run = study::open_run(a.run);
  const std::vector<std::string> points = run.model->hook_points();
  if (std::find(points.begin(), points.end(), a.at) == points.end())
    throw UsageError("--at " + a.at + ": not a hook point of this model (e.g. blocks.0.resid_post" +
                     (run.model->blocks[0]->mlp ? std::string(", blocks.0.mlp.post") : std::string()) + ")");
  const std::string out = a.out.empty() ? io::layout::sae_dir(a.run, a.at) : a.out;
  std::optional<io::RunLock> lock;
  if (a.out.empty()) lock.emplace(a.run);  // one writer per run folder
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw UsageError("--out " + out + ": exists and is not a folder");
  const std::string checkpoint = out + "/checkpoint.safetensors";
  if (a.resume) {
    const train::SafetensorsFile header = train::read_safetensors_header(checkpoint);
    config = study::sae_config_from_json(
        io::parse_json(train::metadata_string(header, "config", checkpoint), checkpoint + " (config)"),
        checkpoint + " (config)");
  }

  study::ModelActivations source(*run.model, *run.task, a.at, config);
  std::filesystem::create_directories(out);  // once the point is known to be one an SAE can read
  study::SaeTrainer trainer(config, source.d_in(), a.resume ? std::vector<float>{} : source.mean());
  if (a.resume) trainer.load_checkpoint(checkpoint);
  const std::map<std::string, std::string> metadata = {{"config", study::sae_config_to_json(config).dump()},
                                                       {"hook_name", a.at},
                                                       {"d_in", std::to_string(source.d_in())},
                                                       {"d_sae", std::to_string(trainer.params().d_sae())},
                                                       {"run", a.run}};
  std::optional<StopOnSignal> stop(std::in_place);
  const bool finished = train_sae(
      trainer, [&](int64_t step) { return source.batch(step); }, "sae " + a.at, checkpoint, metadata, a.json,
      stop->stop());
  stop.reset();
  if (!finished) {
    const std::string again =
        "attograd sae " + a.run + " --at " + a.at + (a.out.empty() ? "" : " --out " + a.out);
    std::fprintf(stderr, "interrupted at step %lld: checkpoint saved; continue with: %s --resume\n",
                 static_cast<long long>(trainer.steps_done()), again.c_str());
    return 130;
  }
  study::save_sae(out + "/sae.safetensors", trainer.params(), metadata);

  const train::Batch held_out = run.task->eval_set(run.config.seed, config.eval_sequences);
  std::vector<findings::SaeFeature> features;
  const study::SaeEval e =
      study::evaluate_sae(*run.model, *run.task, trainer.params(), config, a.at, held_out, &features);
  const json ej = eval_to_json(a.at, e, source.d_in(), trainer.params().d_sae());
  io::write_text_file_atomically(out + "/eval.json", ej.dump(1) + "\n");
  io::write_text_file_atomically(out + "/features.json",
                                 findings::sae_features_to_json(features).dump() + "\n");
  io::write_text_file_atomically(
      out + "/features.html",
      findings::sae_features_html(run.config.name + ", step " + std::to_string(run.step) + ": SAE at " + a.at,
                                  ej, features));
  if (a.out.empty()) study::write_run_report(a.run, run.config.name);  // its "Sparse autoencoders" section
  if (a.json) {
    std::printf("%s\n", json{{"point", a.at},
                             {"d_in", source.d_in()},
                             {"d_sae", trainer.params().d_sae()},
                             {"mse", e.mse},
                             {"explained_variance", e.explained_variance},
                             {"l0", e.l0},
                             {"dead", e.dead},
                             {"ce_loss_recovered", e.ce_loss_recovered},
                             {"kl", e.kl}}
                            .dump()
                            .c_str());
    return 0;
  }
  std::printf("SAE at %s: d_in %lld, d_sae %lld, %lld held-out tokens\n", a.at.c_str(),
              static_cast<long long>(source.d_in()), static_cast<long long>(trainer.params().d_sae()),
              static_cast<long long>(e.tokens));
  std::printf("mse %.6g  explained variance %.4f  L0 %.2f  dead %lld\n", e.mse, e.explained_variance, e.l0,
              static_cast<long long>(e.dead));
  std::printf("CE clean %.4f  with SAE %.4f  zero-ablated %.4f  recovered %.4f  KL %.5f\n", e.ce_clean,
              e.ce_with_sae, e.ce_zero_ablation, e.ce_loss_recovered, e.kl);
  std::printf("wrote %s/{sae.safetensors,eval.json,features.json,features.html}\n", out.c_str());
  return 0;
}

int run_synthetic(const Args& a) {
  study::SaeConfig config = read_config(a.config);
  if (a.config.empty()) {
    // Defaults for the synthetic source: TopK near its expected L0 (features x p, 5.1 for the defaults).
    config.activation = study::SaeActivation::topk;
    config.k = 6;
    config.lr = 3e-3;
  }
  config.d_sae = a.sae_features;
  config.seed = a.seed;
  if (a.sae_features < a.features)
    throw UsageError("--sae-features " + std::to_string(a.sae_features) + ": expected at least --features (" +
                     std::to_string(a.features) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  const study::SyntheticFeatures source(a.features, a.dim, a.p, a.seed);
  study::SaeTrainer trainer(config, a.dim, std::vector<float>(static_cast<size_t>(a.dim), 0.f));
  train_sae(
      trainer, [&](int64_t step) { return source.batch(step, config.batch_size); }, "sae synthetic", "", {},
      a.json);
  // Evaluation on samples of a stream the training never saw.
  const int64_t N = 16384;
  std::vector<float> truth;
  const ag::Tensor<float> x = source.batch(-2, N, &truth);
  ag::NoGradScope no_grad;
  const study::SaeOutput<float> o = study::sae_forward(trainer.params(), x, config.activation, 0.f, config.k);
  const int64_t M = trainer.params().d_sae();
  double l0 = 0;
  std::vector<char> alive(static_cast<size_t>(M), 0);
  for (int64_t i = 0; i < N * M; ++i)
    if (o.f.data()[i] > 0) {
      l0 += 1;
      alive[i % M] = 1;
    }
  const double cos = study::mean_max_cos(source.directions(), trainer.params().W_dec.to_vector(), a.dim);
  const double mcc = study::mcc(truth, a.features, o.f.to_vector(), M, N);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t dead = M - std::count(alive.begin(), alive.end(), 1);
  const json j = {{"mean_max_cos", cos}, {"mcc", mcc}, {"l0", l0 / N}, {"dead", dead}, {"seconds", seconds}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%lld features in %lld dims, p %g; SAE of %lld features, %lld steps:\n",
              static_cast<long long>(a.features), static_cast<long long>(a.dim), a.p,
              static_cast<long long>(M), static_cast<long long>(config.steps));
  std::printf("mean max cos %.4f  MCC %.4f  L0 %.2f  dead %lld  (%.1f s)\n", cos, mcc, l0 / N,
              static_cast<long long>(dead), seconds);
  return 0;
}

}  // namespace

Command add_sae(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "sae", "train a sparse autoencoder on a model's activations at a hook point, and evaluate it");
  sub->footer(
      "Writes DIR (default RUN_DIR/sae/POINT): sae.safetensors (W_enc, b_enc, W_dec, b_dec, SAELens's "
      "names),\n"
      "checkpoint.safetensors (for --resume), eval.json, features.json and features.html. The config's "
      "fields\n"
      "and the evaluation's definitions: docs/sae.md.\n"
      "Example: attograd sae runs/text --at blocks.1.mlp.post --config configs/sae.json");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)");
  sub->add_option("--at", a->at,
                  "hook point of shape (B, T, D), e.g. blocks.0.mlp.post or blocks.1.resid_post");
  sub->add_option("--config", a->config, "SAE config (JSON; every field has a default)");
  sub->add_option("--out", a->out, "output folder (default RUN_DIR/sae/POINT)");
  sub->add_flag("--resume", a->resume, "continue from DIR/checkpoint.safetensors, bit-exactly");
  sub->add_flag("--json", a->json, "print one JSON line instead of the summary");
  auto s = std::make_shared<Args>();
  CLI::App* syn = sub->add_subcommand(
      "synthetic",
      "an SAE on synthetic sparse features with known directions: how well it recovers them (without\n"
      "--config: TopK, k 6, lr 0.003, 3000 steps of 1024)");
  syn->add_option("--features", s->features, "true features (default 256)")->check(CLI::Range(1, 1 << 14));
  syn->add_option("--dim", s->dim, "their dimension (default 32)")->check(CLI::Range(1, 1 << 14));
  syn->add_option("--p", s->p, "each feature's probability of being active (default 0.02)")
      ->check(CLI::Range(1e-6, 1.0));
  syn->add_option("--sae-features", s->sae_features, "the SAE's features (default 512)")
      ->check(CLI::Range(1, 1 << 16));
  syn->add_option("--seed", s->seed, "seed of the source and the SAE (default 1)");
  syn->add_option("--config", s->config, "SAE config (JSON); d_sae and seed come from the options");
  syn->add_flag("--json", s->json,
                "print {\"mean_max_cos\", \"mcc\", \"l0\", \"dead\", \"seconds\"} on one line");
  return [a, s, syn] { return syn->parsed() ? run_synthetic(*s) : run_sae(*a); };
}

}  // namespace cli
