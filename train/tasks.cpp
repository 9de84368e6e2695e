// The registry's lookups (tasks.h): the kind names, the validation every kind shares around each kind's own
// rule, and building a task. The kinds themselves are in train/tasks/.
#include "train/tasks.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace train {
namespace {

// Bounds that keep every derived size (T, vocabulary, ids) far from int overflow and absurd allocations.
constexpr int kMaxVocab = 1000000;
constexpr int kMaxLength = 10000;
// A task must have this many distinct sequences so that the hash split leaves some for each side.
constexpr double kMinDistinctSequences = 50;

// The registry's entry for a kind; nullptr for an unknown one.
const TaskKind* find_kind(const std::string& name) {
  for (const TaskKind& kind : task_registry()) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& task_kinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> names;
    for (const TaskKind& kind : task_registry()) names.push_back(kind.name);
    return names;
  }();
  return kinds;
}

std::optional<TaskProblem> find_task_problem(const TaskConfig& config) {
  const TaskKind* kind = find_kind(config.kind);
  if (!kind) {
    std::string expected;
    for (const auto& name : task_kinds()) expected += (expected.empty() ? "" : ", ") + name;
    return TaskProblem{"kind", "unknown task \"" + config.kind + "\"; expected one of " + expected};
  }
  if (config.train_fraction < 0 || config.train_fraction >= 1 || std::isnan(config.train_fraction))
    return TaskProblem{"train_fraction", "must be in (0, 1), or 0 for the kind's own split"};
  if (kind->data_less) return kind->check(config);
  if (!config.tokenizer.empty() && config.kind != "text")
    return TaskProblem{"tokenizer", "only text (unit \"bpe\") and pretrained read a tokenizer"};
  if (kind->reads_file) {
    if (config.path.empty())
      return TaskProblem{"path", config.kind + " reads its data from a file: set task.path"};
    if (!config.vocab_file.empty() && config.kind != "sequences")
      return TaskProblem{"vocab_file", "only sequences reads a vocabulary file"};
    return kind->check ? kind->check(config) : std::nullopt;
  }
  if (!config.path.empty())
    return TaskProblem{"path",
                       config.kind + " generates its own data; only the kinds that read a file take a path"};
  if (!config.vocab_file.empty()) return TaskProblem{"vocab_file", "only sequences reads a vocabulary file"};
  const std::string v = std::to_string(config.vocab);
  const std::string n = std::to_string(config.length);
  if (config.vocab < 2) return TaskProblem{"vocab", "must be >= 2, got " + v};
  if (config.vocab > kMaxVocab) {
    return TaskProblem{"vocab", "must be <= " + std::to_string(kMaxVocab) + ", got " + v};
  }
  if (config.length < kind->min_length) {
    return TaskProblem{"length",
                       config.kind + " needs length >= " + std::to_string(kind->min_length) + ", got " + n};
  }
  if (config.length > kMaxLength) {
    return TaskProblem{"length", "must be <= " + std::to_string(kMaxLength) + ", got " + n};
  }
  if (kind->check) {
    if (auto problem = kind->check(config)) return problem;
  }
  if (kind->log10_distinct_sequences(config) < std::log10(kMinDistinctSequences)) {
    return TaskProblem{"length", config.kind + " with vocab " + v + " and length " + n + " has fewer than " +
                                     std::to_string(int(kMinDistinctSequences)) +
                                     " distinct sequences, too few to hold some out for evaluation"};
  }
  return std::nullopt;
}

double log10_distinct_sequences(const TaskConfig& config) {
  const TaskKind* kind = find_kind(config.kind);
  if (!kind) throw std::invalid_argument("/task/kind: unknown task \"" + config.kind + "\"");
  return kind->log10_distinct_sequences(config);
}

bool task_is_data_less(const TaskConfig& config) {
  const TaskKind* kind = find_kind(config.kind);
  return kind && kind->data_less;
}

bool task_needs_run_folder(const TaskConfig& config) {
  const TaskKind* kind = find_kind(config.kind);
  return kind && kind->data_less && !config.tokenizer.empty() &&
         !std::filesystem::path(config.tokenizer).is_absolute();
}

std::unique_ptr<Task> make_task(const TaskConfig& config, uint64_t seed, const std::string& folder) {
  if (auto problem = find_task_problem(config)) {
    throw std::invalid_argument("/task/" + problem->field + ": " + problem->message);
  }
  TaskConfig resolved = config;
  if (task_needs_run_folder(config))
    resolved.tokenizer =
        (std::filesystem::path(folder.empty() ? "." : folder) / config.tokenizer).lexically_normal().string();
  std::unique_ptr<Task> task = find_kind(config.kind)->make(resolved);
  task->prepare(seed);
  return task;
}

}  // namespace train
