// attograd compare (being written).
#include "cli/commands.h"

namespace cli {

Command add_compare(CLI::App& app) {
  app.add_subcommand("compare", "(not yet available)");
  return [] {
    throw UsageError("compare: not yet available in this build");
    return 2;
  };
}

}  // namespace cli
