// The shared part of every task (task.h): batching, the held-out split and its own evaluation stream, and
// token naming. The task kinds themselves live in train/tasks/.
#include "train/task.h"

#include <algorithm>
#include <stdexcept>

namespace train {
namespace {

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

std::vector<int> Task::range(int first, int last) {
  std::vector<int> positions;
  for (int t = first; t <= last; ++t) positions.push_back(t);
  return positions;
}

int Task::draw_value(ag::Rng& rng, int bound) {
  return static_cast<int>(rng.below(static_cast<uint64_t>(bound)));
}

}  // namespace train
