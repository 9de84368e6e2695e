// The shared part of every task (task.h): batching, the stream's held-out split and its own evaluation
// stream, finite datasets (enumeration, the seeded split, epochs), and token naming. The task kinds
// themselves live in train/tasks/.
#include "train/task.h"

#include <algorithm>
#include <cmath>
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
// A finite dataset's split shuffles with Rng(seed ^ this), "data_split" in ASCII; each epoch's order with
// Rng(seed ^ kEpochSalt ^ epoch * golden ratio).
constexpr uint64_t kSplitSalt = 0x646174615f73706cULL;
constexpr uint64_t kEpochSalt = 0x65706f6368735f31ULL;
// Each side of a split must hold at least this many sequences.
constexpr int64_t kMinSplitSide = 2;

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

Task::Task(const TaskConfig& config, std::vector<std::string> names, int seq_len)
    : config_(config), values_(0), names_(std::move(names)), seq_len_(seq_len) {}

int Task::vocab_size() const {
  return names_.empty() ? static_cast<int>(specials_.size()) + values_ : static_cast<int>(names_.size());
}

std::string Task::token_name(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary 0.." +
                            std::to_string(vocab_size() - 1));
  }
  if (!names_.empty()) return names_[id];
  if (id < static_cast<int>(specials_.size())) return specials_[id];
  return std::to_string(id - static_cast<int>(specials_.size()));
}

std::optional<int> Task::token_id(const std::string& name) const {
  if (!names_.empty()) {
    // The kinds with a table keep it sorted, so a binary search finds a name.
    const auto it = std::lower_bound(names_.begin(), names_.end(), name);
    if (it != names_.end() && *it == name) return static_cast<int>(it - names_.begin());
    const auto linear = std::find(names_.begin(), names_.end(), name);  // a vocab_file's own order
    if (linear != names_.end()) return static_cast<int>(linear - names_.begin());
    return std::nullopt;
  }
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

std::string Task::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + token_name(id);
  return out;
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

void Task::append_data(Batch& batch, int64_t i) const {
  const int64_t begin = data_.offsets[i], end = data_.offsets[i + 1];
  const int inputs = static_cast<int>(end - begin - 1);
  const size_t row = batch.inputs.size();
  batch.inputs.insert(batch.inputs.end(), data_.tokens.begin() + begin, data_.tokens.begin() + end - 1);
  batch.inputs.resize(row + seq_len_, 0);  // padding: any id, never attended to or scored
  batch.targets.resize(row + seq_len_, -1);
  if (inputs < seq_len_ || !batch.is_padding.empty()) {
    batch.is_padding.resize(row, 0);  // the rows before the first padded one have none
    batch.is_padding.resize(row + inputs, 0);
    batch.is_padding.resize(row + seq_len_, 1);
  }
  if (data_.scored_offsets.empty()) {
    const std::vector<int32_t> sequence(data_.tokens.begin() + begin, data_.tokens.begin() + end);
    for (int t : scored_positions_of(sequence)) batch.targets[row + t] = sequence[t + 1];
  } else {
    for (int64_t k = data_.scored_offsets[i]; k < data_.scored_offsets[i + 1]; ++k) {
      const int t = data_.scored[k];
      batch.targets[row + t] = data_.tokens[begin + t + 1];
    }
  }
  ++batch.B;
}

Batch Task::empty_batch() const {
  Batch batch;
  batch.T = seq_len_;
  return batch;
}

void Task::set_dataset(Dataset dataset, std::string what) {
  pending_ = std::move(dataset);
  pending_what_ = std::move(what);
}

void Task::prepare(uint64_t seed) {
  seed_ = seed;
  const double fraction = config_.train_fraction;
  Dataset dataset = std::move(pending_);
  std::string what = pending_what_;
  if (dataset.sequences.empty()) {
    if (fraction == 0 || splits_itself()) return;  // a stream
    const uint64_t count = enumerable_count();
    if (count == 0) {
      throw TaskDataError(
          "train_fraction",
          config_.kind + " at this vocab and length cannot be enumerated (at most " +
              std::to_string(kMaxEnumerated) +
              " distinct sequences, and not induction), so it has no finite dataset to split");
    }
    for (uint64_t i = 0; i < count; ++i) {
      dataset.sequences.push_back(sequence_at(i));
      dataset.ids.push_back(static_cast<int64_t>(i));
    }
    what = config_.kind + "'s " + std::to_string(count) + " sequences";
  }

  const int64_t n = static_cast<int64_t>(dataset.sequences.size());
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (dataset.held_out.empty()) {
    // Fisher-Yates from the seed: exactly round(f * n) sequences train.
    ag::Rng rng(seed ^ kSplitSalt);
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<uint64_t>(i + 1))]);
    const int64_t n_train = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
    data_.train.assign(order.begin(), order.begin() + n_train);
    data_.held_out.assign(order.begin() + n_train, order.end());
  } else {
    for (int64_t i = 0; i < n; ++i) (dataset.held_out[i] ? data_.held_out : data_.train).push_back(i);
  }
  const int64_t n_train = static_cast<int64_t>(data_.train.size());
  const int64_t n_held = static_cast<int64_t>(data_.held_out.size());
  if (n_train < kMinSplitSide || n_held < kMinSplitSide) {
    const std::string sides = std::to_string(n_train) + " training and " + std::to_string(n_held) +
                              " held-out sequences; each side needs at least " +
                              std::to_string(kMinSplitSide);
    throw TaskDataError(dataset.held_out.empty() ? "train_fraction" : "path",
                        what + ": the split leaves " + sides);
  }

  bool any_scored = false;
  for (const auto& s : dataset.scored) any_scored = any_scored || !s.empty();
  data_.offsets.push_back(0);
  if (any_scored) data_.scored_offsets.push_back(0);
  for (int64_t i = 0; i < n; ++i) {
    const auto& sequence = dataset.sequences[i];
    data_.tokens.insert(data_.tokens.end(), sequence.begin(), sequence.end());
    data_.offsets.push_back(static_cast<int64_t>(data_.tokens.size()));
    if (any_scored) {
      data_.scored.insert(data_.scored.end(), dataset.scored[i].begin(), dataset.scored[i].end());
      data_.scored_offsets.push_back(static_cast<int64_t>(data_.scored.size()));
    }
  }
  data_.ids = std::move(dataset.ids);
}

int64_t Task::split_size(bool held_out) const {
  return static_cast<int64_t>((held_out ? data_.held_out : data_.train).size());
}

std::vector<int64_t> Task::split_ids(bool held_out) const {
  std::vector<int64_t> ids;
  for (int64_t i : held_out ? data_.held_out : data_.train) ids.push_back(data_.ids[i]);
  std::sort(ids.begin(), ids.end());
  return ids;
}

const std::vector<int64_t>& Task::epoch_order(int64_t epoch) const {
  if (cached_epoch_ != epoch) {
    cached_order_ = data_.train;
    ag::Rng rng(seed_ ^ kEpochSalt ^ (static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL));
    for (size_t i = cached_order_.size() - 1; i > 0; --i)
      std::swap(cached_order_[i], cached_order_[rng.below(i + 1)]);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

Batch Task::training_batch(int64_t step, int batch_size, ag::Rng& rng) const {
  if (!finite()) return sample(rng, batch_size);
  Batch batch = empty_batch();
  const int64_t n = static_cast<int64_t>(data_.train.size());
  if (batch_size == 0) {
    // The whole training set, in the order of its names: full-batch gradient descent.
    std::vector<int64_t> all = data_.train;
    std::sort(all.begin(), all.end());
    for (int64_t i : all) append_data(batch, i);
    return batch;
  }
  std::lock_guard<std::mutex> lock(epoch_mutex_);
  for (int64_t k = step * batch_size, end = k + batch_size; k < end; ++k)
    append_data(batch, epoch_order(k / n)[k % n]);
  return batch;
}

Batch Task::sample(ag::Rng& rng, int batch_size) const {
  if (finite()) return training_batch(0, batch_size, rng);
  Batch batch = empty_batch();
  batch.inputs.reserve(static_cast<size_t>(batch_size) * seq_len_);
  batch.targets.reserve(static_cast<size_t>(batch_size) * seq_len_);
  for (int b = 0; b < batch_size; ++b) append(batch, draw_from_split(rng, false));
  return batch;
}

Batch Task::eval_set(uint64_t seed, int n) const {
  if (finite()) return split_set(true, n);
  ag::Rng rng(seed ^ kEvalStreamSalt);
  Batch batch = empty_batch();
  for (int b = 0; b < n; ++b) append(batch, draw_from_split(rng, true));
  return batch;
}

Batch Task::split_set(bool held_out, int64_t n) const {
  if (!finite()) throw std::logic_error("task " + config_.kind + " has no finite dataset");
  const std::vector<int64_t>& side = held_out ? data_.held_out : data_.train;
  Batch batch = empty_batch();
  const int64_t count = std::min<int64_t>(n, static_cast<int64_t>(side.size()));
  for (int64_t i = 0; i < count; ++i) append_data(batch, side[i]);
  return batch;
}

std::vector<int> Task::digits(uint64_t index, int base, int n) {
  std::vector<int> out(n);
  for (int& d : out) {
    d = static_cast<int>(index % static_cast<uint64_t>(base));
    index /= static_cast<uint64_t>(base);
  }
  return out;
}

uint64_t Task::power_up_to(int base, int n, uint64_t limit) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i) {
    if (p > limit / static_cast<uint64_t>(base)) return 0;
    p *= static_cast<uint64_t>(base);
  }
  return p;
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
