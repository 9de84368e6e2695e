// The layout copy, reverse, sort and counting share: BOS a1..an SEP answer1..answern, where position i holds
// a_i and input position n+i (SEP, then the earlier answers) predicts answer i. A kind says only how its
// answers follow from the prompt, its ideal attention and its description.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/random.h"
#include "train/config.h"
#include "train/task.h"

namespace train {
namespace tasks {

class PromptAnswerTask : public Task {
 public:
  // The prompts are vocab^n sequences, each with one answer.
  static double log10_distinct_prompts(const TaskConfig& config) {
    const double n = config.length;
    const double v = config.vocab;
    return n * std::log10(v);
  }

 protected:
  explicit PromptAnswerTask(const TaskConfig& config)
      : Task(config, {"BOS", "SEP"}, config.vocab, 2 * config.length + 1,
             range(config.length + 1, 2 * config.length)) {}

  virtual std::vector<int> answers(const std::vector<int>& prompt) const = 0;

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    std::vector<int> prompt(config().length);
    for (int& a : prompt) a = draw_value(rng, config().vocab);
    return sequence_of(prompt);
  }

  // Prompt k is the n digits of k in base vocab.
  uint64_t enumerable_count() const override {
    return power_up_to(config().vocab, config().length, kMaxEnumerated);
  }
  std::vector<int32_t> sequence_at(uint64_t index) const override {
    return sequence_of(digits(index, config().vocab, config().length));
  }

  std::vector<int32_t> sequence_of(const std::vector<int>& prompt) const {
    std::vector<int32_t> sequence{special_id("BOS")};
    for (int a : prompt) sequence.push_back(value_id(a));
    sequence.push_back(special_id("SEP"));
    for (int answer : answers(prompt)) sequence.push_back(value_id(answer));
    return sequence;
  }

  // The prompt's values as the inputs hold them (-1 for a special token where a value should be).
  std::vector<int> prompt_of(const std::vector<int32_t>& inputs) const {
    std::vector<int> prompt;
    for (int i = 1; i <= config().length; ++i) prompt.push_back(value_of(inputs[i]));
    return prompt;
  }
};

}  // namespace tasks
}  // namespace train
