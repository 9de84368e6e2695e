// attograd forward RUN_DIR (--tokens "BOS 3 1 4" | --ids "0 5 3 6") [--json]: parses the flags into a
// analysis::ForwardRequest, calls analysis::forward (logits, the predicted next token at every position,
// every head's attention weights) and prints its table or JSON.
#include "analysis/attention.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_forward(CLI::App& app) {
  struct Args {
    std::string run;
    InputOptions input;
    analysis::ForwardRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("forward", "one input through a trained model: logits, predictions, attention");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  a->input.add_to(sub, "input as the task's token names, e.g. \"BOS 3 1 4\"",
                  "input as raw token ids, e.g. \"0 5 3 6\"");
  sub->add_flag("--json", a->json, "print one JSON object (ids, tokens, logits, predictions, attention)");
  add_table_options(sub, study::forward_fields(), a->request);  // no rows yet: the input only
  return [a] {
    if (!a->input.given()) throw UsageError("forward: give --prompt, --tokens or --ids");
    analysis::StudyRun run = analysis::open_run(a->run);
    a->request.input = a->input.sequence("forward", run);
    const auto out = analysis::forward(run, a->request);
    return print_output(a->json, out, findings::forward_to_json(out.result),
                        run_title(run) + ", " + std::to_string(out.result.predicted.size()) + " tokens\n",
                        findings::forward_table(out.result));
  };
}

}  // namespace cli
