// The task registry: every toy task kind by name, with its format, its own validation rule, its generator
// and how many distinct sequences it can draw. The kinds are listed in train/tasks/registry.cpp, one file
// each in train/tasks/ (how to add one is at the top of the registry); the shared base class, batching and
// held-out split are in train/task.h. Every function here reads the registry: no kind is named elsewhere.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/task.h"

namespace train {

// The first thing wrong with a task config: the field under /task and what was expected. Config loading
// reports it as `<file>: /task/<field>: <message>`.
struct TaskProblem {
  std::string field;
  std::string message;
};

// One task kind as the registry holds it. The shared ranges of vocab and length (task.cpp's bounds and the
// held-out split's minimum of distinct sequences) apply to every kind; `check` adds the kind's own rule.
struct TaskKind {
  using Check = std::optional<TaskProblem> (*)(const TaskConfig&);
  using Count = double (*)(const TaskConfig&);
  using Make = std::unique_ptr<Task> (*)(const TaskConfig&);

  // The value of task.kind, e.g. "reverse".
  std::string name;
  // One line for docs and --help: the sequence (n = task.length, values 0..task.vocab-1), the model's
  // input length T and what is scored, e.g. "BOS a1..an SEP an..a1; T = 2n+1; scored: the n answers".
  std::string format;
  // The smallest task.length the kind accepts.
  int min_length = 1;
  // The kind reads its data from task.path: task.vocab and task.length do not apply, the file says.
  bool reads_file = false;
  // The kind has no data (pretrained, an imported model's): no task.path, its own check says what it reads.
  bool data_less = false;
  // The kind's own rule, checked after the shared ranges; nullptr when it has none.
  Check check = nullptr;
  // log10 of how many distinct sequences the kind can draw at this config (enough to tell whether a
  // held-out split leaves some sequences on each side).
  Count log10_distinct_sequences = nullptr;
  // The generator, for a config that passed find_task_problem.
  Make make = nullptr;
};

// Every task kind, in the order the docs list them (train/tasks/registry.cpp).
const std::vector<TaskKind>& task_registry();

// Every task kind's name, in the registry's order.
const std::vector<std::string>& task_kinds();

// The first thing wrong with a task config that can be told without reading a file: an unknown kind, the
// shared ranges, the kind's min_length and own rule, then too few distinct sequences for the held-out split.
std::optional<TaskProblem> find_task_problem(const TaskConfig& config);

// log10 of how many distinct sequences the config's task can draw. Throws std::invalid_argument for an
// unknown kind.
double log10_distinct_sequences(const TaskConfig& config);

// The task a config describes, its finite dataset split by `seed` (the run's seed) where it has one.
// Throws std::invalid_argument when find_task_problem finds a problem, TaskDataError (also an
// invalid_argument) for a bad data file or split.
// `folder` is the run folder a data-less kind's relative task.tokenizer is read from (pretrained's
// "tokenizer.json"); empty: the current folder.
std::unique_ptr<Task> make_task(const TaskConfig& config, uint64_t seed, const std::string& folder = "");
// Whether the config's task is of a data-less kind (pretrained), which no run can train on.
bool task_is_data_less(const TaskConfig& config);
// Whether the config's task reads its tokenizer from the run folder (a data-less kind with a relative
// task.tokenizer), so that only make_task with the folder can build it.
bool task_needs_run_folder(const TaskConfig& config);

}  // namespace train
