// attograd train CONFIG [--set key.path=value]... [--out DIR] [--resume RUN_DIR]
#include <atomic>
#include <csignal>
#include <filesystem>

#include "cli/commands.h"
#include "cli/progress.h"
#include "train/checkpoint.h"

namespace cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_interrupt(int) {
  g_stop.store(true);
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out, resume;
  bool overwrite = false;
};

// The config of a resumed run is the one it was trained with; a CONFIG given too must agree with it, and
// --set may change only what does not alter the past (ag::resume_settable_fields, e.g. train.steps to train
// longer).
ag::Config resume_config(const TrainArgs& a) {
  const std::string ckpt = ag::model_checkpoint_path(a.resume);
  if (!std::filesystem::exists(ckpt)) throw UsageError("--resume " + a.resume + ": no checkpoint at " + ckpt);
  ag::check_resume_overrides(a.sets);  // before reading anything: a refused --set is the user's error
  ag::Config stored = ag::config_from_checkpoint(ckpt);
  // Always through the overrides' path, which checks this machine's limits (a run may come from another).
  stored = ag::from_json(ag::to_json(stored), ckpt, a.sets);
  if (!a.config.empty()) {
    ag::Config given = ag::load_config(a.config, a.sets);
    given.output = stored.output;
    if (given != stored)
      throw UsageError(a.config + ": differs from the config " + a.resume + " was trained with (" + a.resume +
                       "/config.json); resume with --resume alone, or change only train.steps with --set");
  }
  stored.output.dir = a.resume;
  return stored;
}

int run(const TrainArgs& a) {
  ag::Config config;
  std::string run_dir;
  if (!a.resume.empty()) {
    config = resume_config(a);
    run_dir = a.resume;
  } else {
    if (a.config.empty()) throw UsageError("train: CONFIG is required (or --resume RUN_DIR)");
    config = ag::load_config(a.config, a.sets);
    if (!a.out.empty()) config.output.dir = a.out;
    run_dir = config.output.dir;
    if (std::filesystem::exists(ag::model_checkpoint_path(run_dir)) && !a.overwrite)
      throw UsageError(run_dir + ": already holds a trained run; --resume " + run_dir +
                       " to continue it, --out DIR for a new one, or --overwrite to replace it");
  }
  Progress progress(stdout);
  ag::TrainOptions options{run_dir, !a.resume.empty(), &g_stop, &progress};
  g_stop.store(false);
  std::signal(SIGINT, on_interrupt);
  const ag::TrainResult r = ag::train_model(config, options);
  std::signal(SIGINT, SIG_DFL);
  progress.finish_line();
  if (r.interrupted) {
    std::printf("interrupted at step %lld: checkpoint saved; continue with: attograd train --resume %s\n",
                static_cast<long long>(r.step), run_dir.c_str());
    return 130;
  }
  std::printf("done: step %lld, loss %.4f", static_cast<long long>(r.step), r.last_loss);
  if (r.final_eval)
    std::printf(", held-out exact match %.2f%% (loss %.4f)", 100 * r.final_eval->acc, r.final_eval->loss);
  std::printf("\nrun folder: %s (report: %s/report.html)\n", run_dir.c_str(), run_dir.c_str());
  return 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "train a model from a JSON config; writes a run folder");
  sub->add_option("CONFIG", args->config, "config file, e.g. configs/reverse.json");
  sub->add_option("--set", args->sets, "override a config field: key.path=value (repeatable)");
  sub->add_option("--out", args->out, "run folder (default: the config's output.dir)");
  sub->add_option("--resume", args->resume, "continue the run in RUN_DIR from its checkpoint");
  sub->add_flag("--overwrite", args->overwrite, "replace an existing run in the output folder");
  return [args] { return run(*args); };
}

}  // namespace cli
