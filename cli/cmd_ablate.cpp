// attograd ablate RUN_DIR [--n N]: parses the flags and calls analysis::ablate_scores (zero and mean ablation
// of every head into RUN/scores.json) or, with --mode zero|mean|resample [--k K] [--seed S]
// [--per-position] [--json], analysis::ablate (that mode alone, printed only), and prints the table or JSON.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/ablation.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "io/run_layout.h"
#include "study/fields.h"

namespace cli {

Command add_ablate(CLI::App& app) {
  struct Args {
    std::string run;
    bool mode_given = false, json = false;
    std::vector<std::string> tokens;
    analysis::AblateRequest request;
  };
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
  // --mode stays the command's own: without it the command runs zero and mean ablation both
  // (analysis::ablate_scores), where Python's ablate is one mode, zero unless told.
  add_table_options(sub, study::ablate_fields(), a->request,
                    {{"n", {"", "", io::at_least(1)}}, {"k", {"", "", io::at_least(1)}}}, {"mode"})
      .at("per_position")
      ->description("with --mode: also each head at each position alone");
  sub->add_option("--mode", a->request.mode,
                  "one mode alone, printed only: zero, mean, or resample (z from another held-out sequence)")
      ->check(CLI::IsMember({"zero", "mean", "resample"}))
      ->each([a](const std::string&) { a->mode_given = true; });
  sub->add_option("--tokens", a->tokens,
                  "with --mode: a sequence of your own instead of the held-out set, token names (BOS put in "
                  "front when missing), a whole sequence of the task (T + 1 tokens); repeat for more");
  sub->add_flag(
      "--json", a->json,
      "with --mode: one JSON object {mode, sequences, k, baseline, heads: [{layer, head, position, acc, "
      "loss}]}");
  return [a] {
    if (!a->mode_given && (a->request.per_position || a->json || !a->tokens.empty()))
      throw UsageError("--per-position, --tokens and --json go with --mode");
    for (const std::string& t : a->tokens) a->request.ids.push_back(analysis::Sequence{{}, t, {}});
    analysis::StudyRun run = analysis::open_run(a->run);
    if (a->mode_given) {
      const auto out = analysis::ablate(run, a->request);
      const findings::ModeAblationResult& r = out.result;
      return print_output(
          a->json, out, findings::mode_ablation_to_json(r),
          run_title(run) + ": " + r.mode + " ablation of each head on " + std::to_string(r.sequences) +
              (a->request.ids.empty() ? " held-out" : " given") + " sequences" +
              (r.mode == "resample" ? ", mean of " + std::to_string(r.k) + " resamples" : "") + "\n",
          findings::mode_ablation_table(r));
    }
    const auto out = analysis::ablate_scores(run, a->request.n);
    const analysis::AblationScores& r = out.result;
    char baseline[160];
    std::snprintf(baseline, sizeof baseline, "\nbaseline (nothing ablated): exact match %.4f, loss %.4f\n",
                  r.baseline_acc, r.baseline_loss);
    return print_output(
        false, out, nullptr,
        run_title(run) + ": ablating each of " + std::to_string(r.scores.heads.size()) + " heads on " +
            std::to_string(r.sequences) + " held-out sequences\n",
        baseline +
            std::string("zero: the head's output set to 0; mean: set to its mean over these sequences (keeps "
                        "its constant\npart, removes what depends on the input). A head matters when its "
                        "ablated accuracy drops.\n\n") +
            findings::head_scores_table(r.scores.heads));
  };
}

}  // namespace cli
