// reverse: BOS a1..an SEP an..a1, the prompt written backwards.
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"
#include "train/tasks/prompt_answer.h"

namespace train {
namespace tasks {
namespace {

class ReverseTask : public PromptAnswerTask {
 public:
  explicit ReverseTask(const TaskConfig& config) : PromptAnswerTask(config) {}

  std::vector<int> answers(const std::vector<int>& prompt) const override {
    return std::vector<int>(prompt.rbegin(), prompt.rend());
  }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    const int n = config().length;
    std::vector<std::vector<int>> keys(seq_len());
    for (int i = 1; i <= n; ++i) keys[n + i] = {n + 1 - i};
    return keys;
  }

  std::string describe() const override {
    return "reverse: BOS a1..an SEP an..a1 with n = " + std::to_string(config().length) + " values in 0.." +
           std::to_string(config().vocab - 1) +
           "; the n reversed values are scored. Ideal attention: the row that predicts a_(n+1-i) looks "
           "at a_(n+1-i) in the prompt, an anti-diagonal.";
  }
};

}  // namespace

TaskKind reverse_task() {
  TaskKind kind;
  kind.name = "reverse";
  kind.format = "BOS a1..an SEP an..a1; T = 2n+1; scored: the n answers";
  kind.min_length = 1;
  kind.log10_distinct_sequences = PromptAnswerTask::log10_distinct_prompts;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<ReverseTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
