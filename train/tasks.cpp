// The toy tasks of tasks.h: one small class per task kind, plus the shared batching, held-out split,
// token naming and validation.
#include "train/tasks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace train {
namespace {

// Bounds that keep every derived size (T, vocabulary, ids) far from int overflow and absurd allocations.
constexpr int kMaxVocab = 1000000;
constexpr int kMaxLength = 10000;
// A task must have this many distinct sequences so that the hash split leaves some for each side.
constexpr double kMinDistinctSequences = 50;
// One sequence in kHeldOutEvery is held out for evaluation.
constexpr uint64_t kHeldOutEvery = 5;
// Held-out sequences come from their own stream: Rng(seed ^ this), "eval_set" in ASCII.
constexpr uint64_t kEvalStreamSalt = 0x6576616c5f736574ULL;
// Rejection sampling gives up after this many draws; with >= 50 distinct sequences split 1 in 5 it never
// gets near this unless a split came out empty.
constexpr int kMaxDrawsPerSequence = 100000;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<int> range(int first, int last) {
  std::vector<int> positions;
  for (int t = first; t <= last; ++t) positions.push_back(t);
  return positions;
}

int draw_value(ag::Rng& rng, int vocab) {
  return static_cast<int>(rng.below(static_cast<uint64_t>(vocab)));
}

// copy, reverse and sort share one layout: BOS a1..an SEP answer1..answern, position i holds a_i and
// input position n+i (SEP, then the earlier answers) predicts answer i.
class PromptAnswerTask : public Task {
 protected:
  explicit PromptAnswerTask(const TaskConfig& config)
      : Task(config, {"BOS", "SEP"}, config.vocab, 2 * config.length + 1,
             range(config.length + 1, 2 * config.length)) {}

  virtual std::vector<int> answers(const std::vector<int>& prompt) const = 0;

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    const int n = config().length;
    std::vector<int> prompt(n);
    for (int& a : prompt) a = draw_value(rng, config().vocab);
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

// BOS a1 + a2 .. + an = c: operand i sits at position 2i-1, "=" at 2n, which predicts c.
class ModAddTask : public Task {
 public:
  explicit ModAddTask(const TaskConfig& config)
      : Task(config, {"BOS", "+", "="}, config.vocab, 2 * config.length + 1, {2 * config.length}) {}

  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override {
    std::vector<int32_t> sequence{special_id("BOS")};
    int64_t sum = 0;
    for (int i = 0; i < config().length; ++i) {
      if (i > 0) sequence.push_back(special_id("+"));
      const int a = draw_value(rng, config().vocab);
      sum += a;
      sequence.push_back(value_id(a));
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

// BOS a1..an SEP c1..cn: c_i counts a_i in the prompt and is written as the value token c_i, so the
// vocabulary must reach n. Input position n+i predicts c_i.
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

// log10 of how many distinct sequences the task can draw, enough to tell whether a held-out split works.
double log10_distinct_sequences(const TaskConfig& config) {
  const double n = config.length;
  const double v = config.vocab;
  if (config.kind == "induction") {
    double sum = 0;
    for (int i = 0; i < config.length; ++i) sum += std::log10(v - i);
    return sum;
  }
  if (config.kind == "random") return (n + 1) * std::log10(v);
  return n * std::log10(v);
}

}  // namespace

Task::Task(const TaskConfig& config, std::vector<std::string> specials, int values, int seq_len,
           std::vector<int> scored_positions)
    : config_(config),
      specials_(std::move(specials)),
      values_(values),
      seq_len_(seq_len),
      scored_positions_(std::move(scored_positions)) {}

std::string Task::token_name(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary 0.." +
                            std::to_string(vocab_size() - 1));
  }
  if (id < static_cast<int>(specials_.size())) return specials_[id];
  return std::to_string(id - static_cast<int>(specials_.size()));
}

std::optional<int> Task::token_id(const std::string& name) const {
  for (size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i] == name) return static_cast<int>(i);
  }
  // Only plain decimal values, as token_name prints them: no sign, no spaces, no leading zeros.
  if (name.empty() || name.size() > 9 || (name.size() > 1 && name[0] == '0')) return std::nullopt;
  if (!std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int value = std::stoi(name);
  if (value >= values_) return std::nullopt;
  return value_id(value);
}

int Task::value_of(int32_t id) const {
  const int value = id - static_cast<int>(specials_.size());
  return value >= 0 && value < values_ ? value : -1;
}

int Task::special_id(const std::string& name) const {
  const auto it = std::find(specials_.begin(), specials_.end(), name);
  if (it == specials_.end()) throw std::logic_error("task " + config_.kind + " has no token " + name);
  return static_cast<int>(it - specials_.begin());
}

void Task::check_inputs(const std::vector<int32_t>& inputs) const {
  if (static_cast<int>(inputs.size()) != seq_len_) {
    throw std::invalid_argument(config_.kind + " expects " + std::to_string(seq_len_) + " input ids, got " +
                                std::to_string(inputs.size()));
  }
}

bool Task::is_held_out(const std::vector<int32_t>& sequence) const {
  uint64_t hash = 0x68656c645f6f7574ULL;  // "held_out"
  for (int32_t id : sequence) hash = mix64(hash ^ static_cast<uint32_t>(id));
  return hash % kHeldOutEvery == 0;
}

std::vector<int32_t> Task::draw_from_split(ag::Rng& rng, bool held_out) const {
  for (int draw = 0; draw < kMaxDrawsPerSequence; ++draw) {
    std::vector<int32_t> sequence = draw_sequence(rng);
    if (is_held_out(sequence) == held_out) return sequence;
  }
  throw std::runtime_error("task " + config_.kind + ": no " + (held_out ? "held-out" : "training") +
                           " sequence in " + std::to_string(kMaxDrawsPerSequence) +
                           " draws; the task has too few distinct sequences");
}

void Task::append(Batch& batch, const std::vector<int32_t>& sequence) const {
  batch.inputs.insert(batch.inputs.end(), sequence.begin(), sequence.end() - 1);
  const size_t row = batch.targets.size();
  batch.targets.resize(row + seq_len_, -1);
  for (int t : scored_positions_of(sequence)) batch.targets[row + t] = sequence[t + 1];
  ++batch.B;
}

Batch Task::sample(ag::Rng& rng, int batch_size) const {
  Batch batch;
  batch.T = seq_len_;
  batch.inputs.reserve(static_cast<size_t>(batch_size) * seq_len_);
  batch.targets.reserve(static_cast<size_t>(batch_size) * seq_len_);
  for (int b = 0; b < batch_size; ++b) append(batch, draw_from_split(rng, false));
  return batch;
}

Batch Task::eval_set(uint64_t seed, int n) const {
  ag::Rng rng(seed ^ kEvalStreamSalt);
  Batch batch;
  batch.T = seq_len_;
  for (int b = 0; b < n; ++b) append(batch, draw_from_split(rng, true));
  return batch;
}

const std::vector<std::string>& task_kinds() {
  static const std::vector<std::string> kinds{"copy",   "reverse",  "sort",  "induction",
                                              "modadd", "counting", "random"};
  return kinds;
}

std::optional<TaskProblem> find_task_problem(const TaskConfig& config) {
  const auto& kinds = task_kinds();
  if (std::find(kinds.begin(), kinds.end(), config.kind) == kinds.end()) {
    std::string expected;
    for (const auto& kind : kinds) expected += (expected.empty() ? "" : ", ") + kind;
    return TaskProblem{"kind", "unknown task \"" + config.kind + "\"; expected one of " + expected};
  }
  const std::string v = std::to_string(config.vocab);
  const std::string n = std::to_string(config.length);
  if (config.vocab < 2) return TaskProblem{"vocab", "must be >= 2, got " + v};
  if (config.vocab > kMaxVocab) {
    return TaskProblem{"vocab", "must be <= " + std::to_string(kMaxVocab) + ", got " + v};
  }
  const int min_length = config.kind == "induction" || config.kind == "modadd" ? 2 : 1;
  if (config.length < min_length) {
    return TaskProblem{"length",
                       config.kind + " needs length >= " + std::to_string(min_length) + ", got " + n};
  }
  if (config.length > kMaxLength) {
    return TaskProblem{"length", "must be <= " + std::to_string(kMaxLength) + ", got " + n};
  }
  if (config.kind == "induction" &&
      config.vocab < 2 * config.length - InductionTask::min_block(config.length)) {
    return TaskProblem{"vocab",
                       "induction draws up to " +
                           std::to_string(2 * config.length - InductionTask::min_block(config.length)) +
                           " distinct values (fillers and the repeated block) for length " + n +
                           ", so vocab must be at least that, got " + v};
  }
  if (config.kind == "counting" && config.vocab <= config.length) {
    return TaskProblem{"vocab", "counting writes counts up to length " + n +
                                    " as value tokens, so vocab must be > " + n + ", got " + v};
  }
  if (log10_distinct_sequences(config) < std::log10(kMinDistinctSequences)) {
    return TaskProblem{"length", config.kind + " with vocab " + v + " and length " + n + " has fewer than " +
                                     std::to_string(int(kMinDistinctSequences)) +
                                     " distinct sequences, too few to hold some out for evaluation"};
  }
  return std::nullopt;
}

std::unique_ptr<Task> make_task(const TaskConfig& config) {
  if (auto problem = find_task_problem(config)) {
    throw std::invalid_argument("/task/" + problem->field + ": " + problem->message);
  }
  if (config.kind == "copy") return std::make_unique<CopyTask>(config);
  if (config.kind == "reverse") return std::make_unique<ReverseTask>(config);
  if (config.kind == "sort") return std::make_unique<SortTask>(config);
  if (config.kind == "induction") return std::make_unique<InductionTask>(config);
  if (config.kind == "modadd") return std::make_unique<ModAddTask>(config);
  if (config.kind == "counting") return std::make_unique<CountingTask>(config);
  return std::make_unique<RandomTask>(config);
}

}  // namespace train
