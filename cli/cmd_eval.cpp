// attograd eval RUN_DIR [--split heldout|train] [--n N] [--json]: parses the flags into a
// analysis::EvalRequest, calls analysis::evaluate and prints its line or JSON.
#include "analysis/evaluation.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_eval(CLI::App& app) {
  struct Args {
    std::string run;
    analysis::EvalRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("eval", "held-out accuracy and loss of a run's last checkpoint");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  sub->add_flag("--json", a->json, "print one JSON object");
  add_table_options(sub, study::eval_fields(), a->request, {{"n", {"", "", io::at_least(1)}}});
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::evaluate(run, a->request);
    return print_output(a->json, out, findings::eval_to_json(out.result),
                        run.dir + " at step " + std::to_string(run.step) + ": ",
                        findings::eval_line(out.result) + "\n");
  };
}

}  // namespace cli
