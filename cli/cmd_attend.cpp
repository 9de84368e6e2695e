// attograd attend RUN_DIR (--tokens "3 1 4" | --ids "0 5 3 6") [--layer L] [--head H] [--svg FILE] [--json]:
// parses the flags into a analysis::AttendRequest, calls analysis::attend (where each head looks on one
// input) and prints its ASCII heatmaps or JSON: every head compactly by default; --layer and/or --head pick
// heads, each drawn full size with its weight table. --svg writes the shown heads as a self-contained
// picture.
#include "analysis/attention.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_attend(CLI::App& app) {
  struct Args {
    std::string run;
    InputOptions input;
    LayerHeadOptions pick;
    analysis::AttendRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("attend", "ASCII heatmaps of where each head of a trained model looks on one input");
  sub->footer(
      "Tokens are the task's names as `attograd forward` prints them (BOS, SEP, 0, 1, ...). When the task\n"
      "has a BOS token and --tokens does not start with it, BOS is put in front (the model never saw an\n"
      "input without it) and one line says so. --ids are taken exactly as given.\n"
      "Example: attograd attend runs/reverse --tokens \"3 1 4 1 5 9 2 6 SEP 6 2 9\" --layer 1 --head 0");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  a->input.add_to(sub, "input as the task's token names, e.g. \"3 1 4\" (BOS added)",
                  "input as raw token ids, e.g. \"0 5 3 6\" (taken as given)");
  a->pick.add_to(sub, "; full-size heatmaps");
  add_table_options(sub, study::attend_fields(), a->request);
  sub->add_flag("--json", a->json, "print one JSON object (ids, tokens, attention of the shown heads)");
  return [a] {
    if (!a->input.given()) throw UsageError("attend: give --prompt, --tokens or --ids");
    analysis::StudyRun run = analysis::open_run(a->run);
    a->request.input = a->input.sequence("attend", run);
    a->request.layer = a->pick.layer();
    a->request.head = a->pick.head();
    const auto out = analysis::attend(run, a->request);
    const findings::Probe& p = out.result.probe;
    return print_output(a->json, out, findings::attend_to_json(out.result),
                        run_title(run) + ", " + run.config.task.kind + " task, " +
                            std::to_string(p.tokens.size()) + " tokens: " + join_tokens(p.tokens) + "\n",
                        findings::attend_table(out.result));
  };
}

}  // namespace cli
