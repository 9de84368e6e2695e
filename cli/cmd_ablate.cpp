// attograd ablate RUN_DIR [--n N]: a map can mislead, so measure what each head does. For each layer and
// head: held-out exact-match accuracy and loss with that head's output zeroed, and with it replaced by its
// mean over the held-out batch; then the scores table with those columns, RUN/scores.json updated with an
// "ablation" object per head, and RUN/report.html rebuilt.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "autograd/threads.h"
#include "cli/commands.h"
#include "cli/study_input.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/ablation.h"
#include "study/run_study.h"
#include "train/run_folder.h"

namespace cli {

namespace {

struct Args {
  std::string run;
  int n = 0;
};

// Scores that describe this checkpoint: every head of the model, computed at its step.
bool scores_match(const findings::HeadScoresFile& s, const train::LoadedRun& run) {
  if (s.step != run.step) return false;
  const size_t heads = run.model->blocks.size() * static_cast<size_t>(run.config.model.n_heads);
  if (s.heads.size() != heads) return false;
  for (const findings::HeadScores& h : s.heads)
    if (h.layer < 0 || h.layer >= static_cast<int>(run.model->blocks.size()) || h.head < 0 ||
        h.head >= run.config.model.n_heads)
      return false;
  return true;
}

int run_ablate(const Args& a) {
  train::LoadedRun run = train::load_run(a.run);
  const io::RunLock lock(a.run);  // one writer per run folder
  ag::set_num_threads(
      std::min(run.config.train.threads, train::max_threads()));  // may come from a larger machine
  const int n = held_out_count(run, a.n);
  // The same held-out stream as training's evaluations, so the baseline agrees with metrics.jsonl.
  const train::Batch eval_set = run.task->eval_set(run.config.seed, n);
  const std::string scores_path = io::layout::scores_json(a.run);
  findings::HeadScoresFile scores;
  bool have_scores = false;
  if (std::filesystem::exists(scores_path)) {
    scores = findings::read_head_scores(scores_path);
    have_scores = scores_match(scores, run);
    if (!have_scores)
      std::printf("%s: %s; recomputing the scores\n", scores_path.c_str(),
                  scores.step != run.step ? ("step " + std::to_string(scores.step) +
                                             ", but the checkpoint is at step " + std::to_string(run.step))
                                                .c_str()
                                          : "does not list this model's heads");
  }
  if (!have_scores) {
    const train::Batch score_set = run.task->eval_set(run.config.seed, run.config.train.eval_size);
    scores = study::Study(*run.task, run.config, score_set).head_scores(*run.model, run.step);
  }

  std::printf("%s (step %lld): ablating each of %zu heads on %d held-out sequences\n", a.run.c_str(),
              static_cast<long long>(run.step), scores.heads.size(), n);
  const study::AblationReport report = study::ablate_heads(*run.model, eval_set);
  study::merge_ablation(scores, report);

  std::printf("\nbaseline (nothing ablated): exact match %.4f, loss %.4f\n", report.baseline.acc,
              report.baseline.loss);
  std::printf(
      "zero: the head's output set to 0; mean: set to its mean over these sequences (keeps its constant\n"
      "part, removes what depends on the input). A head matters when its ablated accuracy drops.\n\n");
  std::printf("%s", findings::head_scores_table(scores.heads).c_str());

  findings::write_head_scores(scores_path, scores);
  study::write_run_report(a.run, run.config.name);
  std::printf("\nwrote %s (\"ablation\" per head) and %s\n", scores_path.c_str(),
              io::layout::report_html(a.run).c_str());
  return 0;
}

}  // namespace

Command add_ablate(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "ablate", "per head: held-out accuracy and loss with the head zeroed / mean-ablated");
  sub->footer(
      "Each head is ablated alone, by patching its output before Wo on every held-out sequence. The\n"
      "results go into " +
      io::layout::scores_json("RUN") +
      " (\"ablation\": zero_acc, mean_acc, zero_loss, mean_loss) next to\n"
      "the head's pattern scores, and " +
      io::layout::report_html("RUN") + " is rebuilt to show them.");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_option("--n", a->n, "held-out sequences (default: the config's train.eval_size)")
      ->check(CLI::PositiveNumber);
  return [a] { return run_ablate(*a); };
}

}  // namespace cli
