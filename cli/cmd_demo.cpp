// attograd demo (being written).
#include "cli/commands.h"

namespace cli {

Command add_demo(CLI::App& app) {
  app.add_subcommand("demo", "(not yet available)");
  return [] {
    throw UsageError("demo: not yet available in this build");
    return 2;
  };
}

}  // namespace cli
