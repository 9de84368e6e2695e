// attograd lens RUN_DIR (--tokens "..." | --ids "...") [--answer TOK [--wrong TOK]] [--json] [--save NAME]:
// parses the flags into a analysis::LensRequest, calls analysis::lens and prints its table or JSON.
#include "analysis/lens.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "io/run_layout.h"
#include "study/fields.h"

namespace cli {

Command add_lens(CLI::App& app) {
  struct Args {
    std::string run;
    InputOptions input;
    analysis::LensRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "lens",
      "logit lens and residual decomposition: where in the stream the answer appears, and who wrote it");
  sub->footer(
      "The metric at each position is logit[answer] - logit[wrong], or logit[answer] minus the mean logit\n"
      "without --wrong. Accumulated: each layer's resid_pre and the last resid_post through ln_f (with the\n"
      "actual forward's scale) and the unembedding. Components: embed, pos_embed, each head, each attention\n"
      "bias, each MLP, ln_f.bias and lm_head.bias; at each position they sum to the actual metric.\n"
      "Example (induction): attograd lens runs/induction --tokens \"BOS 5 9 3 7 12 5\" --answer 9");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  a->input.add_to(sub, "input as the task's token names (BOS added)");
  sub->add_option("--answer", a->request.answer.name,
                  "token whose logit the metric rewards (default: the top prediction at the last position)");
  sub->add_option("--wrong", a->request.wrong.name,
                  "token whose logit the metric subtracts (default: the mean logit)");
  sub->add_flag("--json", a->json, "print one JSON object instead of the table");
  check_save_name(add_table_options(sub, study::lens_fields(), a->request).at("save"));
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    a->request.input = a->input.sequence("lens", run);
    const auto out = analysis::lens(run, a->request);
    return print_output(a->json, out, findings::lens_to_json(out.result, false),
                        run_title(run) + ": logit lens and residual decomposition\ninput: " +
                            join_tokens(out.result.positions) + "\n",
                        findings::lens_table(out.result));
  };
}

}  // namespace cli
