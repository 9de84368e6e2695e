// induction: BOS f1..fp x1..xm g1..gq x1..xm, a block of distinct values and its repeat among random
// fillers, which only an induction circuit predicts.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/tasks.h"

namespace train {
namespace tasks {
namespace {

// BOS f1..fp x1..xm g1..gq x1..xm, T = 2n: a block of m = ceil(n/2)..n distinct values and its repeat,
// with 2(n - m) random fillers split at random between before the block (p) and between the block and its
// repeat (q). Fillers are drawn with replacement from the values not in the block, so each block value
// occurs exactly once before its repeat, and every token of the repeat but the first is predictable from
// content alone: find the earlier occurrence of the current token and read what followed it. Both where the
// block sits and how far back it is vary, and the fillers are random, so neither position nor counting
// ("the earliest value seen only once") predicts the repeat; an induction circuit does.
class InductionTask : public Task {
 public:
  explicit InductionTask(const TaskConfig& config)
      : Task(config, {"BOS"}, config.vocab, 2 * config.length,
             range(2 * config.length - min_block(config.length) + 1, 2 * config.length - 1)) {}

  static int min_block(int n) { return std::max(2, (n + 1) / 2); }

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    const int n = config().length;
    const int vocab = config().vocab;
    const int m = min_block(n) + draw_value(rng, n - min_block(n) + 1);
    const int fillers = 2 * (n - m);
    const int gap = draw_value(rng, fillers + 1);
    // A partial Fisher-Yates shuffle picks the m distinct block values; the fillers come from the rest.
    std::vector<int> values(vocab);
    for (int v = 0; v < vocab; ++v) values[v] = v;
    for (int i = 0; i < m; ++i) {
      const int j = i + draw_value(rng, vocab - i);
      std::swap(values[i], values[j]);
    }
    const auto filler = [&] { return value_id(values[m + draw_value(rng, vocab - m)]); };
    std::vector<int32_t> sequence{special_id("BOS")};
    for (int i = 0; i < fillers - gap; ++i) sequence.push_back(filler());
    const int32_t before_block = sequence.back();  // BOS or the last filler before the block
    for (int i = 0; i < m; ++i) sequence.push_back(value_id(values[i]));
    for (int i = 0; i < gap; ++i) {
      int32_t f = filler();
      // The filler just before the repeat differs from the one just before the block (there are at least
      // two filler values): otherwise it would predict x1 like an induction row, and the repeat would
      // look one token longer.
      while (i == gap - 1 && f == before_block) f = filler();
      sequence.push_back(f);
    }
    for (int i = 0; i < m; ++i) sequence.push_back(value_id(values[i]));
    return sequence;
  }

  // The repeat's x1..x(m-1), which predict x2..xm.
  std::vector<int> scored_positions_of(const std::vector<int32_t>& sequence) const override {
    return range(repeat_start(sequence, seq_len()), seq_len() - 1);
  }

  // The induction pattern, for the scored rows: from the current token, look at the position right after
  // its earlier occurrence (in the block), which holds the token to predict.
  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    check_inputs(inputs);
    std::vector<std::vector<int>> keys(seq_len());
    const int start = repeat_start(inputs, seq_len() - 1);
    const int distance = seq_len() - 1 - previous_occurrence(inputs, seq_len() - 1);
    for (int t = start; t < seq_len(); ++t) keys[t] = {t - distance + 1};
    return keys;
  }

  std::string describe() const override {
    const int n = config().length;
    return "induction: BOS f1..fp x1..xm g1..gq x1..xm with m = " + std::to_string(min_block(n)) + ".." +
           std::to_string(n) + " distinct values, and p + q = 2(" + std::to_string(n) +
           " - m) fillers drawn with replacement from the other values, split at random, in 0.." +
           std::to_string(config().vocab - 1) +
           "; the repeat's x2..xm are scored. Ideal attention: the row holding x_(i-1) of the repeat looks "
           "at the position right after x_(i-1)'s earlier occurrence, which holds x_i.";
  }

 private:
  // The most recent position j in [1, t) holding ids[t], or 0 when there is none.
  static int previous_occurrence(const std::vector<int32_t>& ids, int t) {
    for (int j = t - 1; j >= 1; --j) {
      if (ids[j] == ids[t]) return j;
    }
    return 0;
  }

  // Where the repeat ending at `last` starts: the first position of the longest run ending at `last` whose
  // tokens each first occurred the same distance back (the last token's); last + 1 (an empty run) when
  // ids[last] has no earlier occurrence. On a task sequence that is the repeat's x1.
  static int repeat_start(const std::vector<int32_t>& ids, int last) {
    const int previous = previous_occurrence(ids, last);
    if (previous == 0) return last + 1;
    const int distance = last - previous;
    int start = last;
    while (start - 1 - distance >= 1 && ids[start - 1 - distance] == ids[start - 1] &&
           previous_occurrence(ids, start - 1 - distance) == 0)
      --start;
    return start;
  }
};

// The fillers and the block are 2n - min_block(n) distinct values at most.
std::optional<TaskProblem> check_induction(const TaskConfig& config) {
  const int needed = 2 * config.length - InductionTask::min_block(config.length);
  if (config.vocab < needed) {
    return TaskProblem{"vocab", "induction draws up to " + std::to_string(needed) +
                                    " distinct values (fillers and the repeated block) for length " +
                                    std::to_string(config.length) + ", so vocab must be at least that, got " +
                                    std::to_string(config.vocab)};
  }
  return std::nullopt;
}

// log10 of v(v-1)..(v-n+1), the count of n distinct values in order: the measure of the task's space that
// the held-out split's minimum is checked against.
double log10_distinct_induction(const TaskConfig& config) {
  const double v = config.vocab;
  double sum = 0;
  for (int i = 0; i < config.length; ++i) sum += std::log10(v - i);
  return sum;
}

}  // namespace

TaskKind induction_task() {
  TaskKind kind;
  kind.name = "induction";
  kind.format =
      "BOS f1..fp x1..xm g1..gq x1..xm, m = ceil(n/2)..n distinct values, p + q = 2(n-m) fillers from the "
      "other values; T = 2n; scored: x2..xm of the repeat";
  kind.min_length = 2;
  kind.check = check_induction;
  kind.log10_distinct_sequences = log10_distinct_induction;
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<InductionTask>(config);
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
