// The one shape of a study tool, and what every tool shares: opening a run for study, reading an input
// sequence and a token from a request, and the one-line error a bad request gives. Not the tools themselves
// (study/tools.h lists them) and not their front ends (cli/, python/).
//
// How to add a tool X (docs/extending.md walks through `entropy`, added in four source files):
//   1. findings/X_view.h (.cpp when it grows): the result, plain data, with X_to_json, X_from_json and its
//      terminal table. No model there.
//   2. analysis/X.h/.cpp (or the room of its purpose): `struct XRequest` (plain fields with defaults, no
//      flags) and `Output<findings::XResult> x(StudyRun&, const XRequest&)` that checks the request
//      (RequestError naming the field), computes, and, when the request saves, writes its files through one
//      `save_x` that takes every path from io/run_layout.h under the run's lock.
//   3. study/tools.cpp: the request's table (io/field_table.h) and one row (name, summary, inputs, the
//      table, the call returning the result's JSON, the command's text). The Python module binds every row
//      (Run.X(...) or attograd.X(...)), and `attograd X` is made from the row (cli/tool_command.cpp): its
//      --json prints the same JSON the row returns.
//   4. A test of x in tests/analysis/, a row in tests/python/test_tools.py comparing the Python call with
//      `attograd X --json` on the same run, and the command's section in docs/cli.md.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/run_folder.h"

namespace analysis {

// A request the tool cannot serve: one line naming the request's field as the request names it
// ("clean: ...", "layer 5: ..."), never a front end's flag. Exit 2 on the command line, ValueError in Python.
class RequestError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A run opened for study: its resolved config, the model of its last checkpoint, its task (the tokens'
// names) and step.
using StudyRun = train::LoadedRun;

// Opens the run folder `dir` for study (train::load_run) and sets the engine's threads to the config's
// train.threads, at most this machine's (a run may come from a larger machine). Every tool and both front
// ends open runs through this.
StudyRun open_run(const std::string& dir);

// What a tool returns: its result, the files it wrote (empty when it saved nothing) and notes for the
// user (e.g. that BOS was put in front of an input), for a front end to print.
template <typename Result>
struct Output {
  Result result;
  std::vector<std::string> wrote;
  std::vector<std::string> notes;
};

// An input sequence as a request holds it: text (`--prompt`, JSON {"prompt": TEXT}: encoded by the task's
// tokenizer, a text task's characters or bytes; token names for the other kinds), token names ("BOS 3 1
// 4", split on white space) or raw token ids, the first of them that is not empty.
struct Sequence {
  std::string text;
  std::string tokens;
  std::vector<int64_t> ids;
  bool empty() const { return text.empty() && tokens.empty() && ids.empty(); }
};

// A token as a request holds it: its name, or (when `name` is empty and `id` is set) its id. Empty when
// neither is given.
struct Token {
  std::string name;
  std::optional<int64_t> id;
  bool empty() const { return name.empty() && !id; }
};

// How a tool takes token names: with the task's BOS put in front when the user left it out (a model never
// saw an input without it), or exactly as given (forward shows what the model does on exactly its input).
enum class Bos { kAdd, kAsGiven };

// The note a tool adds when it put BOS in front of an input: "(BOS put in front: every KIND sequence ...)".
std::string bos_note(const StudyRun& run);

// The ids of `input`, checked against the vocabulary and max_len; errors name `field`. Ids are always taken
// as given; text and token names get the task's BOS (train::Task::bos_id) put in front when `bos` says so
// and it is missing. When BOS was put in front, bos_note(run) is added to `notes` (once).
std::vector<int32_t> input_ids(const StudyRun& run, const Sequence& input, const std::string& field,
                               Bos bos = Bos::kAdd, std::vector<std::string>* notes = nullptr);

// The user's sequences as a batch the way the task makes its held-out set: each a whole sequence of the
// task (token names, BOS put in front when missing, or ids; T + 1 tokens, the task's input length plus
// one), the model's inputs all but its last token, the targets the next token at the task's scored
// positions of the sequence (Task::scored_positions_of). RequestError naming `field`[i] otherwise.
train::Batch sequences_batch(const StudyRun& run, const std::vector<Sequence>& sequences,
                             const std::string& field, std::vector<std::string>* notes = nullptr);

// The id of `token` in the run's task: its name, else (a text model) the one token its text encodes to, so
// " the" is GPT-2's \sthe; RequestError "FIELD: unknown token 'NAME' (HINT)" (or "FIELD: token id N is
// outside the vocabulary 0..V-1").
int token_id(const StudyRun& run, const Token& token, const std::string& field);

// A token's name, or "<id N>" for an id the model has but the task never uses (model.vocab larger).
std::string token_label(const StudyRun& run, int id);
std::vector<std::string> token_labels(const StudyRun& run, const std::vector<int32_t>& ids);

// RequestError "layer 5: the model has 2 layers (valid: 0..1)" (or "head ...") when out of range.
void check_layer_head(const StudyRun& run, std::optional<int> layer, std::optional<int> head);

// A named finding saved in the run (patch --save, lens --save): STEM.json and STEM.svg, each written
// atomically, then report.html rebuilt, all under the run's lock; returns the paths written. STEM comes
// from io/run_layout.h.
std::vector<std::string> save_named(const StudyRun& run, const std::string& stem,
                                    const std::string& json_text, const std::string& svg);

// A saved picture's title: "CONFIG NAME, step N: WHAT".
std::string picture_title(const StudyRun& run, const std::string& what);

// "" when `name` is a valid save name (letters, digits, '_', '-' and '.' not first, at most 100
// characters), else what is wrong with it.
std::string save_name_problem(const std::string& name);

}  // namespace analysis
