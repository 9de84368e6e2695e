// random: uniform random tokens for benchmarks; there is nothing to learn.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"

namespace train {
namespace tasks {
namespace {

// Uniform random tokens for benchmarks: no special tokens, so the model's vocabulary is exactly task.vocab,
// and every position is scored. There is nothing to learn; its accuracy means nothing.
class RandomTask : public Task {
 public:
  explicit RandomTask(const TaskConfig& config)
      : Task(config, {}, config.vocab, config.length, range(0, config.length - 1)) {}

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    std::vector<int32_t> sequence(config().length + 1);
    for (int32_t& x : sequence) x = value_id(draw_value(rng, config().vocab));
    return sequence;
  }

  uint64_t enumerable_count() const override {
    return power_up_to(config().vocab, config().length + 1, kMaxEnumerated);
  }
  std::vector<int32_t> sequence_at(uint64_t index) const override {
    std::vector<int32_t> sequence;
    for (int v : digits(index, config().vocab, config().length + 1)) sequence.push_back(value_id(v));
    return sequence;
  }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    return std::vector<std::vector<int>>(seq_len());
  }

  std::string describe() const override {
    return "random: " + std::to_string(config().length + 1) + " uniform random tokens in 0.." +
           std::to_string(config().vocab - 1) +
           ", next-token loss on every position; for benchmarks, there is nothing to learn.";
  }
};

}  // namespace

TaskKind random_task() {
  TaskKind kind;
  kind.name = "random";
  kind.format =
      "x0..xn uniform over vocab, no special tokens; T = n; scored: every position (benchmarks only)";
  kind.min_length = 1;
  // vocab^(n+1) sequences.
  kind.log10_distinct_sequences = [](const TaskConfig& config) {
    const double n = config.length;
    const double v = config.vocab;
    return (n + 1) * std::log10(v);
  };
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<RandomTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
