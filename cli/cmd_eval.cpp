// attograd eval RUN_DIR [--json]: held-out exact-match accuracy and loss of the run's last checkpoint.
#include <algorithm>
#include <cstdio>

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
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("eval", "held-out accuracy and loss of a run's last checkpoint");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  sub->add_flag("--json", a->json, "print one JSON object");
  sub->add_option("--n", a->n, "held-out sequences (default: the config's train.eval_size)")
      ->check(CLI::PositiveNumber);
  return [a] {
    train::LoadedRun run = train::load_run(a->run);
    ag::set_num_threads(
        std::min(run.config.train.threads, train::max_threads()));  // may come from a larger machine
    const int n = held_out_count(run, a->n);
    // The same held-out stream as training's evaluations, so the numbers agree with metrics.jsonl.
    const train::EvalResult r = train::evaluate(*run.model, run.task->eval_set(run.config.seed, n));
    if (a->json)
      std::printf("%s\n",
                  nlohmann::json{{"eval_acc", r.acc}, {"eval_loss", r.loss}, {"n", r.n}}.dump().c_str());
    else
      std::printf("%s at step %lld: held-out exact match %.2f%% (%d sequences), loss %.4f\n", a->run.c_str(),
                  static_cast<long long>(run.step), 100 * r.acc, r.n, r.loss);
    return 0;
  };
}

}  // namespace cli
