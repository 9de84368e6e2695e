// attograd ablate RUN_DIR [--n N]: a map can mislead, so measure what each head does. For each layer and
// head: held-out exact-match accuracy and loss with that head's output zeroed, and with it replaced by its
// mean over the held-out batch; then the scores table with those columns, RUN/scores.json updated with an
// "ablation" object per head, and RUN/report.html rebuilt. With --mode zero|mean|resample [--k K] [--seed S]
// [--per-position] [--json]: that mode alone, per head (and per head and position), printed only.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/threads.h"
#include "cli/commands.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/ablation.h"
#include "study/run_study.h"
#include "train/run_folder.h"

namespace cli {

namespace {

struct Args {
  std::string run, mode;
  int n = 0, k = 4;
  uint64_t seed = 1;
  bool per_position = false, json = false;
};

// --mode: one ablation mode, printed (and --json) without touching scores.json.
int run_mode(const Args& a, const train::LoadedRun& run, const train::Batch& eval_set) {
  const study::AblationMode mode = study::parse_ablation_mode(a.mode, "--mode");
  if (mode == study::AblationMode::resample && eval_set.B < 2)
    throw UsageError("--mode resample needs at least 2 held-out sequences (--n " +
                     std::to_string(eval_set.B) + ")");
  const study::ModeAblationReport r =
      study::ablate_heads_mode(*run.model, eval_set, mode, a.per_position, a.k, a.seed);
  if (a.json) {
    const nlohmann::json j = study::mode_ablation_to_json(r, mode, eval_set.B, a.k);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): %s ablation of each head on %d held-out sequences%s\n", a.run.c_str(),
              static_cast<long long>(run.step), a.mode.c_str(), eval_set.B,
              mode == study::AblationMode::resample
                  ? (", mean of " + std::to_string(a.k) + " resamples").c_str()
                  : "");
  std::printf(
      "baseline: exact match %.4f, loss %.4f\n\n  head   position  exact match    loss   loss change\n",
      r.baseline.acc, r.baseline.loss);
  for (const study::ModeAblation& h : r.heads)
    std::printf("  %-6s %8s  %11.4f  %7.4f  %+12.4f\n", findings::head_name(h.layer, h.head).c_str(),
                h.position < 0 ? "all" : std::to_string(h.position).c_str(), h.acc, h.loss,
                h.loss - r.baseline.loss);
  return 0;
}

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
  const int n = train::held_out_count(run, a.n);
  // The same held-out stream as training's evaluations, so the baseline agrees with metrics.jsonl.
  const train::Batch eval_set = run.task->eval_set(run.config.seed, n);
  if (!a.mode.empty()) return run_mode(a, run, eval_set);
  if (a.per_position || a.json) throw UsageError("--per-position and --json go with --mode");
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
  sub->add_option("--mode", a->mode,
                  "one mode alone, printed only: zero, mean, or resample (z from another held-out sequence)")
      ->check(CLI::IsMember({"zero", "mean", "resample"}));
  sub->add_option("--k", a->k, "resample: draws to average over (default 4)")->check(CLI::PositiveNumber);
  sub->add_option("--seed", a->seed, "resample: the draws' seed (default 1)");
  sub->add_flag("--per-position", a->per_position, "with --mode: also each head at each position alone");
  sub->add_flag(
      "--json", a->json,
      "with --mode: one JSON object {mode, sequences, k, baseline, heads: [{layer, head, position, acc, "
      "loss}]}");
  return [a] { return run_ablate(*a); };
}

}  // namespace cli
