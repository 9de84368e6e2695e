// attograd train CONFIG [--set key.path=value]... [--out DIR] [--resume RUN_DIR]
#include <cmath>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/stop_signal.h"
#include "io/run_layout.h"
#include "runner/train_run.h"

namespace cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out, resume;
  bool overwrite = false;
};

int run(const TrainArgs& a) {
  train::Config config;
  std::string run_dir;
  std::unique_ptr<io::RunLock> lock;  // held until the process ends: one writer per run folder
  if (!a.resume.empty()) {
    runner::ResumedRun resumed = runner::prepare_resume({a.resume, a.config, a.sets});
    config = std::move(resumed.config);
    lock = std::move(resumed.lock);
    run_dir = a.resume;
  } else {
    if (a.config.empty()) throw UsageError("train: CONFIG is required (or --resume RUN_DIR)");
    if (!a.out.empty()) runner::check_folder_argument("--out", a.out);
    config = train::load_config(a.config, a.sets);
    if (!a.out.empty()) config.output.dir = a.out;
    run_dir = config.output.dir;
    lock = runner::prepare_new_run_folder(run_dir, a.overwrite,
                                          {"--resume " + run_dir, "--out DIR", "--overwrite"});
  }
  Progress progress(stdout);
  std::optional<StopOnSignal> stop(std::in_place);
  const runner::TrainedRun trained =
      runner::train_with_study(config, run_dir, !a.resume.empty(), stop->stop(), {&progress});
  const train::TrainResult& r = trained.result;
  stop.reset();
  progress.finish_line();
  if (!trained.score_table.empty()) std::printf("%s", trained.score_table.c_str());
  if (r.interrupted) {
    std::printf("interrupted at step %lld: checkpoint saved; continue with: attograd train --resume %s\n",
                static_cast<long long>(r.step), run_dir.c_str());
    return 130;
  }
  std::printf("done: step %lld, loss %.4f", static_cast<long long>(r.step), r.last_loss);
  // A text model's windows are never all right: its held-out number is the loss in bits per character.
  if (r.final_eval && config.task.kind == "text")
    std::printf(", held-out loss %.4f (%.4f bits per %s)", r.final_eval->loss,
                r.final_eval->loss / std::log(2.0),
                config.task.unit == "byte"  ? "byte"
                : config.task.unit == "bpe" ? "token"
                                            : "character");
  else if (r.final_eval)
    std::printf(", held-out exact match %.2f%% (loss %.4f)", 100 * r.final_eval->acc, r.final_eval->loss);
  std::printf("\nrun folder: %s (report: %s)\n", run_dir.c_str(), io::layout::report_html(run_dir).c_str());
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
