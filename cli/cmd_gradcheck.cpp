// attograd gradcheck CONFIG [--set ...] [--tolerance X] [--json]: parses the flags into a
// analysis::GradcheckRequest, calls analysis::gradcheck and prints its table or JSON; exit 1 when it fails.
#include <cmath>
#include <exception>
#include <string>

#include "analysis/gradcheck.h"
#include "cli/commands.h"
#include "cli/print.h"

namespace cli {

Command add_gradcheck(CLI::App& app) {
  struct Args {
    analysis::GradcheckRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("gradcheck", "whole-model finite-difference gradient check in float64");
  sub->add_option("CONFIG", a->request.config, "config file")->required();
  sub->add_option("--set", a->request.set, "override a config field: key.path=value");
  // A NaN tolerance passes nothing and a negative one fails everything: both are mistakes.
  add_number(sub, "--tolerance", a->request.tolerance, "worst relative error allowed (default 1e-6)",
             io::above(0));
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
