// attograd: one program, one subcommand per job (docs/cli.md). This file only
// dispatches and turns failures into one-line messages and exit codes: 0 success, 1 the run failed, 2 bad
// input.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "io/atomic_file.h"
#include "io/printable.h"
#include "train/config.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  CLI::App app{
      "attograd: a tiny autograd engine for attention; train small transformers and study their heads"};
  app.require_subcommand(1);
  app.failure_message(CLI::FailureMessage::simple);
  std::map<CLI::App*, cli::Command> commands;
  auto add = [&](cli::Command (*f)(CLI::App&)) {
    cli::Command c = f(app);
    commands[app.get_subcommands({}).back()] = std::move(c);
  };
  for (auto add_command : cli::kCommands) add(add_command);
  for (auto& [sub, command] : cli::add_tool_commands(app)) commands[sub] = std::move(command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = e.get_name();
    std::fprintf(stderr, "attograd: %s (see attograd --help)\n", io::printable(what).c_str());
    return 2;
  }
  for (auto& [sub, command] : commands) {
    if (!sub->parsed()) continue;
    try {
      return command();
    } catch (const train::TrainingDiverged& e) {
      std::fprintf(stderr, "attograd %s: %s\n", sub->get_name().c_str(), io::printable(e.what()).c_str());
      return 1;
    } catch (const io::WriteError& e) {  // disk full, I/O error: the run failed, the input was fine
      std::fprintf(stderr, "attograd %s: %s\n", sub->get_name().c_str(), io::printable(e.what()).c_str());
      return 1;
    } catch (const std::exception& e) {
      // Config errors, unreadable or corrupt files, bad arguments: all name their source in one line
      // (escaped here too, whatever bytes a file name or value brought in).
      std::fprintf(stderr, "attograd %s: %s\n", sub->get_name().c_str(), io::printable(e.what()).c_str());
      return 2;
    }
  }
  return 2;
}
