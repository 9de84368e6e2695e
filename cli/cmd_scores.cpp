// attograd scores RUN_DIR [--json]: calls analysis::scores (every head's scores at the run's checkpoint) and
// prints the score table or JSON. Writes nothing.
#include <string>
#include <vector>

#include "analysis/scores.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_scores(CLI::App& app) {
  struct Args {
    std::string run;
    std::vector<std::string> tokens;
    bool json = false;
    analysis::ScoresRequest request;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "scores", "every head's task, previous-token, first-token, induction and duplicate-token scores");
  sub->footer(
      "Computed at the run's checkpoint on its held-out set, as training computes scores.json\n"
      "(docs/head-scores.md); prints only.");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_option("--tokens", a->tokens,
                  "a sequence of your own, token names (BOS put in front when missing), a whole sequence of "
                  "the task (T + 1 tokens); repeat for more; default: the held-out set");
  sub->add_flag("--json", a->json, "print one JSON object {step, heads: [...]} instead of the table");
  add_table_options(sub, study::scores_fields(), a->request);  // no rows yet: the sequences only
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    analysis::ScoresRequest request = a->request;
    for (const std::string& t : a->tokens) request.ids.push_back(analysis::Sequence{{}, t, {}});
    const auto out = analysis::scores(run, request);
    return print_output(a->json, out, findings::head_scores_to_json(out.result),
                        run_title(run) + ": head scores on " +
                            (request.ids.empty() ? std::to_string(run.config.train.eval_size) + " held-out"
                                                 : std::to_string(request.ids.size()) + " given") +
                            " sequences\n\n",
                        findings::head_scores_table(out.result.heads));
  };
}

}  // namespace cli
