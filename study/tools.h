// Every study tool, one row each: its name, what it does, and its call on a request given as JSON (the
// request struct's fields by name) returning the result's JSON. The Python module binds every row, and
// `attograd NAME --json` prints what the row returns, so the two front ends give the same answer. A row
// without a hand-written command gets its subcommand from the row alone (cli/tool_command.cpp): its
// options from `rows` and `inputs`, its text from `text`. docs/extending.md says how to add a tool.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "io/field_info.h"
#include "io/field_table.h"

namespace study {

struct Tool {
  std::string name;
  // The name Python binds it under (Run.NAME or attograd.NAME): the name, unless the module already has a
  // method of that name with another meaning (Run.forward is the model's logits, so the forward tool is
  // Run.forward_report).
  std::string python_name;
  std::string summary;
  // The request's fields in order: its input sequences, then its table's rows (Python binds them in this
  // order, so the first ones may be given positionally).
  std::vector<std::string> fields;
  // The table's rows (not the inputs) with the request's defaults, in the table's order: what the command
  // line's options are built from (cli/table_options.h) and what Python's keyword arguments default to.
  std::vector<io::FieldInfo> rows;
  // The first input sequence, which Python's `prompt=TEXT` gives as {"prompt": TEXT}; empty when none.
  std::string prompt_field;
  // Whether the tool reads a trained run (Python: a method of Run) or stands alone (a module function).
  bool reads_run = true;
  // The call: `run` is the open run when reads_run, else null. Errors are RequestError (a bad request),
  // the library's one-line exceptions, or io::WriteError.
  std::function<nlohmann::json(analysis::StudyRun* run, const nlohmann::json& request)> call;

  // ---- What a subcommand made from the row (cli/tool_command.cpp) reads; Python needs none of it.

  // The values each of `rows` accepts (its range, its choices), in the same order.
  std::vector<io::Valid> valid;
  // The request's inputs beyond its table, in the row's order: what the command line takes them as.
  struct Input {
    enum Kind { kSequence, kSequences, kToken, kOptionalInt };
    std::string name;
    Kind kind = kSequence;
    std::string meaning;  // the option's help ("" = the input's name)
  };
  std::vector<Input> inputs;
  // What a call gives a front end that prints: the result's JSON, the files it wrote and notes for the user.
  struct Answer {
    nlohmann::json result;
    std::vector<std::string> wrote, notes;
  };
  std::function<Answer(analysis::StudyRun* run, const nlohmann::json& request)> answer;
  // The terminal's text of a result: a header (after "RUN (step N): " for a tool that reads a run), then the
  // call's notes, then the body (the findings view's table). Without it the command prints the JSON, pretty.
  struct Text {
    std::string header, body;
  };
  std::function<Text(const analysis::StudyRun* run, const nlohmann::json& request,
                     const nlohmann::json& result)>
      text;
  // The command's --help: what --json prints ("{step, heads: [...]}", or "" for "the result") and the lines
  // after the options.
  std::string json_shape;
  std::string footer;
};

// Every tool, in the order the docs list them.
const std::vector<Tool>& tools();

// A row's default as a front end shows it ("0.8", "graph", or what a placeholder stands for:
// "train.eval_size"); "" when there is nothing to show (false, "", an empty list, null).
std::string shown_default(const io::FieldInfo& row);

// The row called `name`; RequestError "NAME: no such tool" when none is.
const Tool& tool(const std::string& name);

}  // namespace study
