// sort: BOS a1..an SEP sorted(a), the prompt in ascending order.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"
#include "train/tasks/prompt_answer.h"

namespace train {
namespace tasks {
namespace {

class SortTask : public PromptAnswerTask {
 public:
  explicit SortTask(const TaskConfig& config) : PromptAnswerTask(config) {}

  std::vector<int> answers(const std::vector<int>& prompt) const override {
    std::vector<int> sorted = prompt;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }

  // The row predicting the i-th smallest value looks at every prompt position holding that value.
  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    const int n = config().length;
    const std::vector<int> prompt = prompt_of(inputs);
    const std::vector<int> sorted = answers(prompt);
    std::vector<std::vector<int>> keys(seq_len());
    for (int i = 1; i <= n; ++i) {
      for (int j = 1; j <= n; ++j) {
        if (prompt[j - 1] == sorted[i - 1]) keys[n + i].push_back(j);
      }
    }
    return keys;
  }

  std::string describe() const override {
    return "sort: BOS a1..an SEP sorted(a) (ascending) with n = " + std::to_string(config().length) +
           " values in 0.." + std::to_string(config().vocab - 1) +
           "; the n sorted values are scored. Ideal attention: the row that predicts the i-th smallest "
           "value looks at the prompt positions holding it.";
  }
};

}  // namespace

TaskKind sort_task() {
  TaskKind kind;
  kind.name = "sort";
  kind.format = "BOS a1..an SEP sorted(a) (ascending); T = 2n+1; scored: the n answers";
  kind.min_length = 1;
  kind.log10_distinct_sequences = PromptAnswerTask::log10_distinct_prompts;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<SortTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
