// modadd: BOS a1 + a2 .. + an = c, with c the operands' sum mod vocab; modadd_bare: a1 a2 .. an = c, the
// format of Nanda et al. 2023 ("Progress measures for grokking"), with no BOS and no "+".
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"

namespace train {
namespace tasks {
namespace {

// BOS a1 + a2 .. + an = c: operand i (from 1) sits at position 2i-1, "=" at 2n, which predicts c.
// Bare: a1 a2 .. an = c: operand i at position i-1, "=" at n.
class ModAddTask : public Task {
 public:
  ModAddTask(const TaskConfig& config, bool bare)
      : Task(config, bare ? std::vector<std::string>{"="} : std::vector<std::string>{"BOS", "+", "="},
             config.vocab, bare ? config.length + 1 : 2 * config.length + 1,
             {bare ? config.length : 2 * config.length}),
        bare_(bare) {}

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
    std::vector<int32_t> sequence;
    if (!bare_) sequence.push_back(special_id("BOS"));
    int64_t sum = 0;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i > 0 && !bare_) sequence.push_back(special_id("+"));
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
    const int n = config().length;
    for (int i = 1; i <= n; ++i) keys[bare_ ? n : 2 * n].push_back(bare_ ? i - 1 : 2 * i - 1);
    return keys;
  }

  std::string describe() const override {
    const std::string p = std::to_string(config().vocab);
    return std::string(bare_ ? "modadd_bare: a1 .. an = c" : "modadd: BOS a1 + .. + an = c") +
           " with n = " + std::to_string(config().length) + " operands in 0.." +
           std::to_string(config().vocab - 1) + " and c = their sum mod " + p +
           "; c is scored. Ideal attention: the \"=\" row looks at the operands.";
  }

 private:
  bool bare_;
};

// vocab^n operand lists, each with one sum.
double log10_operand_lists(const TaskConfig& config) {
  return config.length * std::log10(static_cast<double>(config.vocab));
}

}  // namespace

TaskKind modadd_task() {
  TaskKind kind;
  kind.name = "modadd";
  kind.format = "BOS a1 + a2 .. + an = c, c = (a1 + .. + an) mod vocab; T = 2n+1; scored: c";
  kind.min_length = 2;
  kind.log10_distinct_sequences = log10_operand_lists;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<ModAddTask>(config, /*bare=*/false);
  };
  return kind;
}

TaskKind modadd_bare_task() {
  TaskKind kind;
  kind.name = "modadd_bare";
  kind.format =
      "a1 a2 .. an = c, c = (a1 + .. + an) mod vocab (no BOS, no +: Nanda et al. 2023); T = n+1; "
      "scored: c";
  kind.min_length = 2;
  kind.log10_distinct_sequences = log10_operand_lists;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<ModAddTask>(config, /*bare=*/true);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
