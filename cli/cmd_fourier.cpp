// attograd fourier RUN_DIR [--json]: calls analysis::fourier on the run (saving RUN/fourier/ and rebuilding
// report.html) and prints its summary or JSON.
#include "analysis/fourier.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_fourier(CLI::App& app) {
  struct Args {
    std::string run;
    bool json = false;
    analysis::FourierRequest request;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "fourier",
      "read a modular-addition model in the Fourier basis: key frequencies, restricted loss, Gini");
  sub->footer(
      "For a run of task.kind modadd or modadd_bare with 2 operands and an odd modulus p "
      "(docs/grokking.md).\n"
      "Key frequencies: those that are the best single frequency of at least 1% of the MLP's neurons (and\n"
      "at least 2), counting neurons whose best frequency explains >= 85% of their variance.\n"
      "Example: attograd fourier runs/grokking --json");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_flag("--json", a->json, "print one JSON object instead of the summary");
  // The command always saves (its save row is Python's, where it is opt-in).
  add_table_options(sub, study::fourier_fields(), a->request, {}, {"save"});
  return [a] {
    analysis::FourierRequest request = a->request;
    request.save = true;
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::fourier(run, request);
    return print_output(
        a->json, out, findings::fourier_to_json(out.result),
        run_title(run) + ": Fourier analysis over all " + std::to_string(out.result.p) + "^2 pairs\n",
        findings::fourier_summary(out.result));
  };
}

}  // namespace cli
