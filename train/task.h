// The base of every task: causal-LM batches (inputs, targets, which positions are scored), its token names,
// the ideal attention pattern of its answer rows, and the held-out split. One subclass per task kind lives
// in train/tasks/; train/tasks.h is the registry that names and builds them.
//
// Data comes in two ways:
//   - a stream: draw_sequence() makes fresh sequences forever, and a fixed hash of each sequence holds one
//     in five out for evaluation (the built-in kinds by default; text draws windows from its own regions);
//   - a finite dataset: a fixed list of sequences split once by the seed into a training and a held-out
//     set (a sequence file, or a built-in kind with task.train_fraction, whose whole space is enumerated).
//     Training batches walk the training set in epochs, each shuffled without replacement from the seed
//     and the epoch's number; batch_size 0 is the whole training set every step.
//
// Token ids: the task's special tokens first (BOS, SEP, "+", "="), then the values in order. Example:
// reverse with vocab 10 has BOS = 0, SEP = 1 and value k = k + 2. Kinds that read data name their tokens
// themselves (a token table).
//
// Sequences may be shorter than T + 1: they are padded at the end (targets -1, is_padding 1). With the
// causal mask a real position never attends to a later one, so padding at the end is never attended to and
// never scored; training needs no padding mask.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "train/config.h"

namespace train {

class Tokenizer;

// B sequences of T model inputs, in the causal-LM convention: inputs are the sequence minus its last token,
// targets[b*T + t] is the token at t+1 where position t is scored and -1 where it is not.
struct Batch {
  int B = 0;
  int T = 0;
  std::vector<int32_t> inputs;   // B*T, row-major
  std::vector<int32_t> targets;  // B*T, -1 where not scored
  // B*T, 1 at input positions past the end of a shorter sequence; empty when no row is padded.
  std::vector<uint8_t> is_padding;
};

// A task's data file (or its split) cannot be used: `field` is the field under /task to blame ("path",
// "train_fraction"), the message names the file, line and field inside it.
class TaskDataError : public std::invalid_argument {
 public:
  TaskDataError(std::string field, const std::string& message)
      : std::invalid_argument("/task/" + field + ": " + message),
        field_(std::move(field)),
        message_(message) {}
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string field_;
  std::string message_;
};

class Task {
 public:
  virtual ~Task() = default;

  const TaskConfig& config() const { return config_; }
  // The model's vocabulary: special tokens plus values.
  int vocab_size() const;
  // T, the model's input length (the full sequence is T + 1 tokens).
  int seq_len() const { return seq_len_; }
  // The input positions t whose next token is scored in every sequence, in increasing order. Most tasks
  // score exactly these; induction scores more, wherever its repeated block happens to fall.
  const std::vector<int>& scored_positions() const { return scored_positions_; }
  // The positions scored in one full sequence (T + 1 ids).
  virtual std::vector<int> scored_positions_of(const std::vector<int32_t>& /*sequence*/) const {
    return scored_positions_;
  }

  // "BOS", "SEP", "+", "=" for special tokens, the decimal value for the others (or the kind's own token
  // table). Throws std::out_of_range for an id outside [0, vocab_size()).
  std::string token_name(int id) const;
  // The id of a token name as token_name prints it; nothing for an unknown name.
  std::optional<int> token_id(const std::string& name) const;
  // The token every sequence starts with, which a tool puts in front of an input that lacks it: the token
  // named "BOS", or a tokenizer's own (Llama's "<s>"); nothing when the kind has none.
  virtual std::optional<int> bos_id() const { return token_id("BOS"); }
  // Text kinds: the ids of a piece of text (one per character or byte); throws std::invalid_argument naming
  // the first character outside the vocabulary. Nothing for every other kind, whose inputs are token names.
  virtual std::optional<std::vector<int32_t>> encode_text(const std::string& /*text*/) const {
    return std::nullopt;
  }
  // The byte-level BPE tokenizer of text with unit "bpe" and of pretrained; null for the other kinds.
  virtual const Tokenizer* tokenizer() const { return nullptr; }
  // Text kinds: the text of a list of ids; other kinds: the token names joined by spaces.
  virtual std::string decode(const std::vector<int32_t>& ids) const;

  // A stream's split: whether a full sequence (T + 1 ids) belongs to the held-out set, by a fixed hash of
  // its tokens, so that membership does not depend on the seed and training never sees an evaluation
  // sequence, however small the task's space. (A finite dataset's split is split_ids.)
  bool is_held_out(const std::vector<int32_t>& sequence) const;

  // Builds the finite dataset and its split where the config asks for one (make_task calls it once, with
  // the run's seed). Throws TaskDataError.
  void prepare(uint64_t seed);
  // Whether the task trains on a finite dataset (see the top of this file).
  bool finite() const { return !data_.offsets.empty(); }
  // The number of training and held-out sequences of a finite dataset.
  int64_t split_size(bool held_out) const;
  // What names the sequences of each side of a finite dataset (a file's line numbers from 1, or a built-in
  // kind's enumeration index), in increasing order: the split the run folder records.
  std::vector<int64_t> split_ids(bool held_out) const;
  // Whether the kind splits its data itself (text: by position in the file), so that train_fraction builds
  // no finite dataset.
  virtual bool splits_itself() const { return false; }
  // What split_ids names: "line" or "index".
  virtual std::string split_id_meaning() const { return "index"; }

  // The training batch of step `step` (from 0): a finite dataset's epochs (batch_size 0 = all of it), or
  // batch_size sequences of the stream drawn from `rng`. Never contains a held-out sequence.
  Batch training_batch(int64_t step, int batch_size, ag::Rng& rng) const;
  // A stream's training batch drawn from `rng`; for a finite dataset, the first step's batch.
  Batch sample(ag::Rng& rng, int batch_size) const;
  // n held-out sequences, the same for the same seed: drawn from their own stream (not the training one),
  // or a finite dataset's first min(n, all) held-out sequences in the split's seeded order.
  Batch eval_set(uint64_t seed, int n) const;
  // A finite dataset's first min(n, all) sequences of one side, in the split's seeded order. Throws
  // std::logic_error for a stream.
  Batch split_set(bool held_out, int64_t n) const;

  // For one sequence's inputs (T ids): per input position, the key positions that the ideal attention
  // pattern of that row looks at; empty for the rows that are not scored (and for every row of random).
  virtual std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const = 0;
  // One paragraph: the format, what is scored and the ideal attention pattern.
  virtual std::string describe() const = 0;
  // A note on where the longest sequence is (a file's line), for the error when max_len is too short.
  virtual std::string longest_sequence_note() const { return ""; }

 protected:
  Task(const TaskConfig& config, std::vector<std::string> specials, int values, int seq_len,
       std::vector<int> scored_positions);
  // A kind that names its own tokens: token id i is names[i].
  Task(const TaskConfig& config, std::vector<std::string> names, int seq_len);
  // One full sequence (T + 1 ids) drawn from `rng`. Kinds with only a finite dataset never draw.
  virtual std::vector<int32_t> draw_sequence(ag::Rng& rng) const = 0;
  // One full sequence of the stream's training (held_out false) or held-out side. By default, draws until
  // the hash of a drawn sequence puts it on that side.
  virtual std::vector<int32_t> draw_from_split(ag::Rng& rng, bool held_out) const;

  // How many distinct sequences the kind can enumerate at this config (0: it cannot), and the one at an
  // index in [0, that count). Needed for task.train_fraction on a built-in kind.
  virtual uint64_t enumerable_count() const { return 0; }
  static constexpr uint64_t kMaxEnumerated = 1000000;
  virtual std::vector<int32_t> sequence_at(uint64_t /*index*/) const { return {}; }
  // For enumerable kinds: n digits of `index` in base `base`, least significant first.
  static std::vector<int> digits(uint64_t index, int base, int n);
  // base^n, or 0 when it is above `limit`.
  static uint64_t power_up_to(int base, int n, uint64_t limit);

  // A finite dataset, as a kind that reads a file hands it over: every sequence (full, T + 1 ids at most),
  // the positions scored in each (empty lists = scored_positions_of), the name of each (line numbers), and
  // a fixed side per sequence when the file says (then train_fraction must be 0).
  struct Dataset {
    std::vector<std::vector<int32_t>> sequences;
    std::vector<std::vector<int>> scored;
    std::vector<int64_t> ids;
    std::vector<uint8_t> held_out;  // empty: split by task.train_fraction
  };
  // Keeps a kind's file data until prepare() splits it. `what` names the data in errors (the file).
  void set_dataset(Dataset dataset, std::string what);
  // The id of value k.
  int32_t value_id(int k) const { return static_cast<int32_t>(specials_.size()) + k; }
  // The value of an id, or -1 for a special token.
  int value_of(int32_t id) const;
  int special_id(const std::string& name) const;
  // Throws std::invalid_argument when `inputs` does not hold T ids.
  void check_inputs(const std::vector<int32_t>& inputs) const;

  // The positions first..last, both included.
  static std::vector<int> range(int first, int last);
  // A uniform draw from 0..bound-1.
  static int draw_value(ag::Rng& rng, int bound);

 private:
  // A finite dataset after prepare(): the sequences concatenated, with their scored positions.
  struct Data {
    std::vector<int32_t> tokens;   // sequence i is tokens[offsets[i], offsets[i+1])
    std::vector<int64_t> offsets;  // empty: the task is a stream
    std::vector<int32_t> scored;   // sequence i scores input positions scored[scored_offsets[i] ..]
    std::vector<int64_t> scored_offsets;
    std::vector<int64_t> ids;
    std::vector<int64_t> train, held_out;  // sequence indices, in the split's seeded order
  };

  void append(Batch& batch, const std::vector<int32_t>& sequence) const;
  // Appends finite sequence i, padded to T.
  void append_data(Batch& batch, int64_t i) const;
  Batch empty_batch() const;
  // Sequence indices of the training set in the order epoch `epoch` visits them (cached: one epoch serves
  // many steps).
  const std::vector<int64_t>& epoch_order(int64_t epoch) const;

  TaskConfig config_;
  std::vector<std::string> specials_;
  int values_;
  std::vector<std::string> names_;  // a kind's own token table; empty: specials then decimal values
  int seq_len_;
  std::vector<int> scored_positions_;
  Dataset pending_;  // a kind's file data until prepare()
  std::string pending_what_;
  Data data_;
  uint64_t seed_ = 0;
  mutable std::mutex epoch_mutex_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_order_;
};

}  // namespace train
