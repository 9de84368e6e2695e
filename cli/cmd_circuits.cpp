// attograd circuits RUN_DIR [--json] [--no-composition] [--processed]: parses the flags into a
// analysis::CircuitsRequest (saving RUN/circuits.json, RUN/circuits/*.svg and report.html unless
// --processed), calls analysis::circuits and prints its tables or JSON.
#include "analysis/circuits.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_circuits(CLI::App& app) {
  struct Args {
    std::string run;
    bool json = false, no_composition = false;
    analysis::CircuitsRequest request;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "circuits",
      "read the circuit from the weights: composition, copying, positional QK, direct logit attribution");
  sub->footer(
      "docs/circuits.md gives each formula. The composition baseline is the mean score of random Gaussian\n"
      "matrices of the same shapes and rank (100 pairs, fixed seed): read a score against it.");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_flag("--json", a->json, "print one JSON object instead of the tables");
  sub->add_flag("--no-composition", a->no_composition, "skip composition (needed for one-layer models)");
  // --no-composition says the composition row the command line's way round; the command saves unless
  // --processed (Python's circuits saves only when told).
  add_table_options(
      sub, study::circuits_fields(), a->request,
      {{"processed",
        {"",
         "read the weights as TransformerLens processes them (LayerNorms folded in, writers and "
         "unembedding centred); prints only, writes no file"}}},
      {"composition", "save"});
  return [a] {
    a->request.composition = !a->no_composition;
    a->request.save = !a->request.processed;
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::circuits(run, a->request);
    return print_output(a->json, out, findings::circuits_to_json(out.result, false),
                        run_title(run) + ": circuits from the " +
                            (a->request.processed ? "processed (LayerNorms folded, centred) " : "") +
                            "weights, DLA on " + std::to_string(run.config.train.eval_size) +
                            " held-out sequences\n\n",
                        findings::circuits_table(out.result));
  };
}

}  // namespace cli
