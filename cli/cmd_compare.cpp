// attograd compare RUN_DIR --a "..." --b "..." [--layer L] [--head H] [--svg FILE] [--json]: parses the
// flags into a analysis::CompareRequest, calls analysis::compare (two inputs of the same length through one
// model) and prints, per head, A's map, B's map and their signed difference A - B side by side, then each
// head's total variation between the two maps, most changed first (or the JSON).
#include "analysis/attention.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_compare(CLI::App& app) {
  struct Args {
    std::string run;
    LayerHeadOptions pick;
    analysis::CompareRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare", "two inputs of the same length, one model: each head's maps side by side and A - B");
  sub->footer(
      "Tokens are the task's names (BOS, SEP, 0, 1, ...). When the task has a BOS token and an input does\n"
      "not start with it, BOS is put in front and one line says so. Total variation per head: the mean over\n"
      "query rows of 0.5 * sum |A - B| (0: the head looks the same way on both inputs, 1: at disjoint "
      "keys).\n"
      "Example: attograd compare runs/reverse --a \"3 1 4 1 5 9 2 6 SEP\" --b \"3 1 4 1 5 9 2 7 SEP\"");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_option("--a", a->request.a.tokens, "first input, as the task's token names")->required();
  sub->add_option("--b", a->request.b.tokens, "second input, as many tokens as --a")->required();
  a->pick.add_to(sub);
  add_table_options(sub, study::compare_fields(), a->request);
  sub->add_flag("--json", a->json,
                "print one JSON object (a, b: ids, tokens, attention; heads: total variation)");
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    a->request.layer = a->pick.layer();
    a->request.head = a->pick.head();
    const auto out = analysis::compare(run, a->request);
    const findings::CompareResult& r = out.result;
    return print_output(a->json, out, findings::compare_to_json(r),
                        run_title(run) + ", " + run.config.task.kind + " task, " +
                            std::to_string(r.a.tokens.size()) + " tokens\n  A: " + join_tokens(r.a.tokens) +
                            "\n  B: " + join_tokens(r.b.tokens) + "\n",
                        findings::compare_table(r));
  };
}

}  // namespace cli
