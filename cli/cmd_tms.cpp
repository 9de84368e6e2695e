// attograd tms [--n N] [--m M] [--sparsity S] [--importance R] [--seed S] [--json] [--out FILE]: parses the
// flags into a dictionary::TmsRequest (a sweep with its figure unless --json), calls dictionary::tms and
// prints the table or one model's JSON.
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "dictionary/tms.h"
#include "study/fields.h"

namespace cli {

Command add_tms(CLI::App& app) {
  struct Args {
    dictionary::TmsRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "tms",
      "toy models of superposition: n features in m dims, x' = ReLU(W^T W x + b), over a sweep of sparsity");
  sub->footer(
      "Without --json: trains one model per sparsity in 0, 0.7, 0.9, 0.97, 0.99, 0.997, prints each "
      "feature's\n"
      "norm and superposition, and writes the figure (docs/sae.md).\n"
      "Examples: attograd tms --n 5 --m 2;  attograd tms --n 20 --m 5 --importance 0.7");
  dictionary::TmsRequest& r = a->request;
  // The ranges as the command line has always said them (the same numbers as the rows').
  add_table_options(
      sub, study::tms_fields(), r,
      {{"n", {"", "", io::at_least(2).up_to(1000)}},
       {"m", {"", "", io::at_least(1).up_to(1000)}},
       {"sparsity", {"", "probability that a feature is 0, with --json", io::at_least(0).up_to(0.9999)}},
       {"importance", {"", "", io::at_least(0.01).up_to(1.0)}},
       {"steps", {"", "", io::at_least(1).up_to(1000000)}}});
  sub->add_option("--out", r.figure, "the figure's file (default tms-nN-mM.svg)");
  sub->add_flag("--json", a->json,
                "train at --sparsity and print {\"W\" (m x n), \"b\", \"loss\"} on one line");
  return [a] {
    dictionary::TmsRequest request = a->request;
    request.sweep = !a->json;
    const auto out = dictionary::tms(request);
    return print_output(a->json, out,
                        a->json ? findings::tms_panel_to_json(out.result.panels.front()) : nlohmann::json(),
                        "", findings::tms_table(out.result));
  };
}

}  // namespace cli
