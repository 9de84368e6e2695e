// attograd attend (being written).
#include "cli/commands.h"

namespace cli {

Command add_attend(CLI::App& app) {
  app.add_subcommand("attend", "(not yet available)");
  return [] {
    throw UsageError("attend: not yet available in this build");
    return 2;
  };
}

}  // namespace cli
