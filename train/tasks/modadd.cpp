// modadd: BOS a1 + a2 .. + an = c, with c the operands' sum mod vocab.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"

namespace train {
namespace tasks {
namespace {

// BOS a1 + a2 .. + an = c: operand i sits at position 2i-1, "=" at 2n, which predicts c.
class ModAddTask : public Task {
 public:
  explicit ModAddTask(const TaskConfig& config)
      : Task(config, {"BOS", "+", "="}, config.vocab, 2 * config.length + 1, {2 * config.length}) {}

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    std::vector<int> operands(config().length);
    for (int& a : operands) a = draw_value(rng, config().vocab);
    return sequence_of(operands);
  }

  // Operand list k is the n digits of k in base vocab.
  uint64_t enumerable_count() const override {
    return power_up_to(config().vocab, config().length, kMaxEnumerated);
  }
  std::vector<int32_t> sequence_at(uint64_t index) const override {
    return sequence_of(digits(index, config().vocab, config().length));
  }

  std::vector<int32_t> sequence_of(const std::vector<int>& operands) const {
    std::vector<int32_t> sequence{special_id("BOS")};
    int64_t sum = 0;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i > 0) sequence.push_back(special_id("+"));
      sum += operands[i];
      sequence.push_back(value_id(operands[i]));
    }
    sequence.push_back(special_id("="));
    sequence.push_back(value_id(static_cast<int>(sum % config().vocab)));
    return sequence;
  }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    std::vector<std::vector<int>> keys(seq_len());
    for (int i = 1; i <= config().length; ++i) keys[2 * config().length].push_back(2 * i - 1);
    return keys;
  }

  std::string describe() const override {
    const std::string p = std::to_string(config().vocab);
    return "modadd: BOS a1 + .. + an = c with n = " + std::to_string(config().length) + " operands in 0.." +
           std::to_string(config().vocab - 1) + " and c = their sum mod " + p +
           "; c is scored. Ideal attention: the \"=\" row looks at the operands.";
  }
};

}  // namespace

TaskKind modadd_task() {
  TaskKind kind;
  kind.name = "modadd";
  kind.format = "BOS a1 + a2 .. + an = c, c = (a1 + .. + an) mod vocab; T = 2n+1; scored: c";
  kind.min_length = 2;
  // vocab^n operand lists, each with one sum.
  kind.log10_distinct_sequences = [](const TaskConfig& config) {
    const double n = config.length;
    const double v = config.vocab;
    return n * std::log10(v);
  };
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<ModAddTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
