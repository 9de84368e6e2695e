// The subcommand of every study tool that has no hand-written cli/cmd_*.cpp, made from its row in
// study::tools() alone: RUN_DIR when the tool reads a run, its inputs (the first sequence as --prompt,
// --tokens or --ids; a list of sequences as --tokens, repeated; another input as --NAME), one option per row
// of its request's table (cli/table_options.h's add_row_options) and --json. It builds the request's JSON,
// calls the row, and prints the row's text (Tool::text), or the result's JSON.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/tools.h"

namespace cli {

namespace {

using nlohmann::json;

// A sequence as the request's JSON holds it: {"prompt": TEXT}, token names or ids.
json sequence_json(const analysis::Sequence& s) {
  if (!s.text.empty()) return {{"prompt", s.text}};
  if (!s.tokens.empty()) return s.tokens;
  return s.ids;
}

Command add_tool_command(CLI::App& app, const study::Tool& tool) {
  if (tool.name.find('_') != std::string::npos)
    throw std::logic_error(tool.name + ": a command made from a tool's row is one word");
  struct Args {
    std::string run;
    InputOptions input;
    bool as_json = false;
    // Each puts what the command line gave into the request (the run open, for --ids).
    std::vector<std::function<void(const analysis::StudyRun*, json&)>> fills;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(tool.name, tool.summary);
  if (!tool.footer.empty()) sub->footer(tool.footer);
  if (tool.reads_run) sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();

  bool sequence_taken = false, tokens_taken = false;
  const auto add_input = [&](const study::Tool::Input& input) {
    const std::string help = input.meaning.empty() ? input.name : input.meaning;
    const std::string key = input.name;
    if (input.kind == study::Tool::Input::kSequence && !sequence_taken && tool.reads_run) {
      sequence_taken = tokens_taken = true;
      a->input.add_to(sub, help);
      const std::string name = tool.name;
      Args* args = a.get();
      a->fills.push_back([args, key, name](const analysis::StudyRun* run, json& request) {
        if (args->input.given()) request[key] = sequence_json(args->input.sequence(name, *run));
      });
    } else if (input.kind == study::Tool::Input::kSequences) {
      auto texts = std::make_shared<std::vector<std::string>>();
      sub->add_option(tokens_taken ? option_name(key) : "--tokens", *texts, help);
      tokens_taken = true;
      a->fills.push_back([texts, key](const analysis::StudyRun*, json& request) {
        if (!texts->empty()) request[key] = *texts;
      });
    } else if (input.kind == study::Tool::Input::kOptionalInt) {
      auto value = std::make_shared<int>();
      CLI::Option* option = add_number(sub, option_name(key), *value, help);
      a->fills.push_back([option, value, key](const analysis::StudyRun*, json& request) {
        if (option->count()) request[key] = *value;
      });
    } else {  // another sequence or a token: its token names
      auto text = std::make_shared<std::string>();
      CLI::Option* option = sub->add_option(option_name(key), *text, help);
      a->fills.push_back([option, text, key](const analysis::StudyRun*, json& request) {
        if (option->count()) request[key] = *text;
      });
    }
  };
  // The order Python binds them in: the inputs, the table's rows, the lists of sequences.
  for (const study::Tool::Input& input : tool.inputs)
    if (input.kind != study::Tool::Input::kSequences) add_input(input);
  const auto fill_rows = add_row_options(sub, tool);
  a->fills.push_back([fill_rows](const analysis::StudyRun*, json& request) { fill_rows(request); });
  for (const study::Tool::Input& input : tool.inputs)
    if (input.kind == study::Tool::Input::kSequences) add_input(input);
  const std::string shape = tool.json_shape.empty() ? "" : " " + tool.json_shape;
  sub->add_flag("--json", a->as_json,
                tool.text ? "print one JSON object" + shape + " instead of the table"
                          : "print the JSON object" + shape + " on one line instead of indented");

  const study::Tool* row = &tool;
  return [a, row] {
    std::optional<analysis::StudyRun> run;
    if (row->reads_run) run.emplace(analysis::open_run(a->run));
    const analysis::StudyRun* open = run ? &*run : nullptr;
    json request = json::object();
    for (const auto& fill : a->fills) fill(open, request);
    const study::Tool::Answer out = row->answer(run ? &*run : nullptr, request);
    if (a->as_json || !row->text)
      return print_output(a->as_json, out.result, "", out.notes, out.result.dump(2) + "\n", out.wrote);
    const study::Tool::Text text = row->text(open, request, out.result);
    return print_output(false, out.result, (run ? run_title(*run) + ": " : "") + text.header, out.notes,
                        text.body, out.wrote);
  };
}

}  // namespace

std::vector<std::pair<CLI::App*, Command>> add_tool_commands(CLI::App& app) {
  std::vector<std::pair<CLI::App*, Command>> added;
  for (const study::Tool& tool : study::tools()) {
    const std::string first = tool.name.substr(0, tool.name.find('_'));
    bool hand_written = false;
    for (const CLI::App* sub : app.get_subcommands({}))
      hand_written = hand_written || sub->get_name() == first;
    if (hand_written) continue;
    Command command = add_tool_command(app, tool);
    added.emplace_back(app.get_subcommands({}).back(), std::move(command));
  }
  return added;
}

}  // namespace cli
