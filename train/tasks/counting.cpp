// counting: BOS a1..an SEP c1..cn, where c_i counts a_i in the prompt and is written as the value token c_i
// (so the vocabulary must reach n).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/tasks.h"
#include "train/tasks/prompt_answer.h"

namespace train {
namespace tasks {
namespace {

// Input position n+i predicts c_i.
class CountingTask : public PromptAnswerTask {
 public:
  explicit CountingTask(const TaskConfig& config) : PromptAnswerTask(config) {}

  std::vector<int> answers(const std::vector<int>& prompt) const override {
    std::vector<int> counts;
    for (int a : prompt) counts.push_back(static_cast<int>(std::count(prompt.begin(), prompt.end(), a)));
    return counts;
  }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    const int n = config().length;
    std::vector<std::vector<int>> keys(seq_len());
    for (int i = 1; i <= n; ++i) {
      for (int j = 1; j <= n; ++j) {
        if (inputs[j] == inputs[i]) keys[n + i].push_back(j);
      }
    }
    return keys;
  }

  std::string describe() const override {
    return "counting: BOS a1..an SEP c1..cn with n = " + std::to_string(config().length) + " values in 0.." +
           std::to_string(config().vocab - 1) +
           ", where c_i is how many times a_i occurs among a1..an (1..n, as value tokens); the n counts "
           "are scored. Ideal attention: the row that predicts c_i looks at every prompt position holding "
           "a_i.";
  }
};

// The counts 1..n are value tokens.
std::optional<TaskProblem> check_counting(const TaskConfig& config) {
  if (config.vocab <= config.length) {
    const std::string n = std::to_string(config.length);
    return TaskProblem{"vocab", "counting writes counts up to length " + n +
                                    " as value tokens, so vocab must be > " + n + ", got " +
                                    std::to_string(config.vocab)};
  }
  return std::nullopt;
}

}  // namespace

TaskKind counting_task() {
  TaskKind kind;
  kind.name = "counting";
  kind.format = "BOS a1..an SEP c1..cn, c_i = occurrences of a_i in a1..an; T = 2n+1; scored: the n counts";
  kind.min_length = 1;
  kind.check = check_counting;
  kind.log10_distinct_sequences = PromptAnswerTask::log10_distinct_prompts;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<CountingTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
