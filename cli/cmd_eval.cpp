// attograd eval RUN_DIR [--split heldout|train] [--n N] [--json]: exact-match accuracy and loss of the run's
// last checkpoint on held-out sequences, or on a finite dataset's training sequences.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "autograd/threads.h"
#include "cli/commands.h"
#include "cli/study_input.h"
#include "train/evaluate.h"
#include "train/run_folder.h"

namespace cli {

Command add_eval(CLI::App& app) {
  struct Args {
    std::string run;
    bool json = false;
    int n = 0;
    std::string split = "heldout";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("eval", "held-out accuracy and loss of a run's last checkpoint");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  sub->add_flag("--json", a->json, "print one JSON object");
  sub->add_option("--n", a->n, "held-out sequences (default: the config's train.eval_size)")
      ->check(CLI::PositiveNumber);
  sub->add_option(
         "--split", a->split,
         "heldout, or train: a finite dataset's training sequences (what the model may have memorised)")
      ->check(CLI::IsMember({"heldout", "train"}));
  return [a] {
    train::LoadedRun run = train::load_run(a->run);
    ag::set_num_threads(
        std::min(run.config.train.threads, train::max_threads()));  // may come from a larger machine
    const bool held_out = a->split == "heldout";
    if (!held_out && !run.task->finite())
      throw UsageError("--split train: " + a->run +
                       " trains on a stream of fresh sequences; only a finite dataset has a training set");
    // Held out: bounded as train.eval_size is; the training side of a finite dataset is bounded by its size.
    const int n = held_out ? held_out_count(run, a->n) : a->n > 0 ? a->n : std::numeric_limits<int>::max();
    // The same held-out sequences as training's evaluations, so the numbers agree with metrics.jsonl.
    const train::EvalResult r = train::evaluate(
        *run.model, held_out ? run.task->eval_set(run.config.seed, n) : run.task->split_set(false, n));
    // A text model's loss per token in bits: bits per character (or byte), the unit text models report.
    const bool text = run.config.task.kind == "text";
    const double bits = r.loss / std::log(2.0);
    if (a->json) {
      nlohmann::json out{{"split", a->split}, {"eval_acc", r.acc}, {"eval_loss", r.loss}, {"n", r.n}};
      if (text) out["bits_per_token"] = bits;
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%s at step %lld: %s exact match %.2f%% (%d sequences), loss %.4f", a->run.c_str(),
                  static_cast<long long>(run.step), held_out ? "held-out" : "training", 100 * r.acc, r.n,
                  r.loss);
      if (text)
        std::printf(", %.4f bits per %s", bits, run.config.task.unit == "byte" ? "byte" : "character");
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace cli
