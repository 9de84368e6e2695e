// attograd ablate (being written).
#include "cli/commands.h"

namespace cli {

Command add_ablate(CLI::App& app) {
  app.add_subcommand("ablate", "(not yet available)");
  return [] {
    throw UsageError("ablate: not yet available in this build");
    return 2;
  };
}

}  // namespace cli
