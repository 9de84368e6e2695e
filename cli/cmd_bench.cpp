// attograd bench (being written).
#include "cli/commands.h"

namespace cli {

Command add_bench(CLI::App& app) {
  app.add_subcommand("bench", "(not yet available)");
  return [] {
    throw UsageError("bench: not yet available in this build");
    return 2;
  };
}

}  // namespace cli
