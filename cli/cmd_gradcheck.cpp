// attograd gradcheck CONFIG [--set ...] [--tolerance X] [--json]: parses the flags into a
// analysis::GradcheckRequest, calls analysis::gradcheck and prints its table or JSON; exit 1 when it fails.
#include <cmath>
#include <exception>
#include <string>

#include "analysis/gradcheck.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_gradcheck(CLI::App& app) {
  struct Args {
    analysis::GradcheckRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("gradcheck", "whole-model finite-difference gradient check in float64");
  // The tolerance's row is > 0: a NaN tolerance passes nothing and a negative one fails everything.
  add_table_options(sub, study::gradcheck_fields(), a->request, {{"config", {"CONFIG"}}})
      .at("config")
      ->required();
  sub->add_flag("--json", a->json,
                "print one JSON object {config, note, T, parameters, tensors, worst, tolerance, pass}");
  return [a] {
    const auto out = analysis::gradcheck(a->request);
    print_output(a->json, out, findings::gradcheck_to_json(out.result),
                 findings::gradcheck_header(out.result), findings::gradcheck_table(out.result));
    return out.result.pass ? 0 : 1;
  };
}

}  // namespace cli
