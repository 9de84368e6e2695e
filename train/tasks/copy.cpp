// copy: BOS a1..an SEP a1..an, the prompt written again.
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"
#include "train/tasks/prompt_answer.h"

namespace train {
namespace tasks {
namespace {

class CopyTask : public PromptAnswerTask {
 public:
  explicit CopyTask(const TaskConfig& config) : PromptAnswerTask(config) {}

  std::vector<int> answers(const std::vector<int>& prompt) const override { return prompt; }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    const int n = config().length;
    std::vector<std::vector<int>> keys(seq_len());
    for (int i = 1; i <= n; ++i) keys[n + i] = {i};
    return keys;
  }

  std::string describe() const override {
    return "copy: BOS a1..an SEP a1..an with n = " + std::to_string(config().length) + " values in 0.." +
           std::to_string(config().vocab - 1) +
           "; the n copied values are scored. Ideal attention: the row that predicts a_i (input SEP or "
           "a_(i-1) of the answer) looks at a_i in the prompt.";
  }
};

}  // namespace

TaskKind copy_task() {
  TaskKind kind;
  kind.name = "copy";
  kind.format = "BOS a1..an SEP a1..an; T = 2n+1; scored: the n answers";
  kind.min_length = 1;
  kind.log10_distinct_sequences = PromptAnswerTask::log10_distinct_prompts;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<CopyTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
