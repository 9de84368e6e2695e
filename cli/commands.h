// The subcommands of the attograd program. Each registers its options on a CLI11 subcommand and returns a
// callable that runs it and gives the exit code (0 ok, 1 the run failed, 2 bad usage or input).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cli {

using Command = std::function<int()>;

// Bad usage or input: main prints "attograd: <message>" on one line and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Command add_train(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_forward(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_attend(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_ablate(CLI::App& app);
Command add_patch(CLI::App& app);
Command add_lens(CLI::App& app);
Command add_detect(CLI::App& app);
Command add_circuits(CLI::App& app);
Command add_fourier(CLI::App& app);
Command add_gradcheck(CLI::App& app);
Command add_demo(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_sae(CLI::App& app);
Command add_transcoder(CLI::App& app);
Command add_graph(CLI::App& app);
Command add_tms(CLI::App& app);
Command add_import(CLI::App& app);

// Every hand-written subcommand, in the order `attograd --help` lists them: a new one is its add_ function
// above and one entry here.
inline Command (*const kCommands[])(CLI::App&) = {
    add_train, add_eval,  add_forward, add_generate,   add_attend,  add_compare,   add_ablate,
    add_patch, add_lens,  add_detect,  add_circuits,   add_fourier, add_gradcheck, add_demo,
    add_bench, add_sweep, add_sae,     add_transcoder, add_graph,   add_tms,       add_import};

// After them, a subcommand for every study tool without one (study::tools(), in its order), made from the
// tool's row alone (cli/tool_command.cpp): a new study tool needs no file here.
std::vector<std::pair<CLI::App*, Command>> add_tool_commands(CLI::App& app);

}  // namespace cli
