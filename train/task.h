// The base of every toy task: a seeded generator of causal-LM batches (inputs, targets, which positions are
// scored), its token names, the ideal attention pattern of its answer rows, and the held-out split. One
// subclass per task kind lives in train/tasks/; train/tasks.h is the registry that names and builds them.
//
// Token ids: the task's special tokens first (BOS, SEP, "+", "="), then the values in order. Example:
// reverse with vocab 10 has BOS = 0, SEP = 1 and value k = k + 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "train/config.h"

namespace train {

// B sequences of T model inputs, in the causal-LM convention: inputs are the sequence minus its last token,
// targets[b*T + t] is the token at t+1 where position t is scored and -1 where it is not.
struct Batch {
  int B = 0;
  int T = 0;
  std::vector<int32_t> inputs;   // B*T, row-major
  std::vector<int32_t> targets;  // B*T, -1 where not scored
};

class Task {
 public:
  virtual ~Task() = default;

  const TaskConfig& config() const { return config_; }
  // The model's vocabulary: special tokens plus values.
  int vocab_size() const { return static_cast<int>(specials_.size()) + values_; }
  // T, the model's input length (the full sequence is T + 1 tokens).
  int seq_len() const { return seq_len_; }
  // The input positions t whose next token is scored in every sequence, in increasing order. Most tasks
  // score exactly these; induction scores more, wherever its repeated block happens to fall.
  const std::vector<int>& scored_positions() const { return scored_positions_; }
  // The positions scored in one full sequence (T + 1 ids).
  virtual std::vector<int> scored_positions_of(const std::vector<int32_t>& /*sequence*/) const {
    return scored_positions_;
  }

  // "BOS", "SEP", "+", "=" for special tokens, the decimal value for the others. Throws std::out_of_range
  // for an id outside [0, vocab_size()).
  std::string token_name(int id) const;
  // The id of a token name as token_name prints it; nothing for an unknown name.
  std::optional<int> token_id(const std::string& name) const;

  // A training batch drawn from `rng`; never contains a held-out sequence.
  Batch sample(ag::Rng& rng, int batch_size) const;
  // n held-out sequences, the same for the same seed, drawn from their own stream (not the training one).
  Batch eval_set(uint64_t seed, int n) const;

  // For one sequence's inputs (T ids): per input position, the key positions that the ideal attention
  // pattern of that row looks at; empty for the rows that are not scored (and for every row of random).
  virtual std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const = 0;
  // One paragraph: the format, what is scored and the ideal attention pattern.
  virtual std::string describe() const = 0;

 protected:
  Task(const TaskConfig& config, std::vector<std::string> specials, int values, int seq_len,
       std::vector<int> scored_positions);
  // One full sequence (T + 1 ids) drawn from `rng`.
  virtual std::vector<int32_t> draw_sequence(ag::Rng& rng) const = 0;
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
  // Whether a sequence belongs to the held-out set: a fixed hash of its tokens, so that membership does not
  // depend on the seed and training never sees an evaluation sequence, however small the task's space.
  bool is_held_out(const std::vector<int32_t>& sequence) const;
  std::vector<int32_t> draw_from_split(ag::Rng& rng, bool held_out) const;
  void append(Batch& batch, const std::vector<int32_t>& sequence) const;

  TaskConfig config_;
  std::vector<std::string> specials_;
  int values_;
  int seq_len_;
  std::vector<int> scored_positions_;
};

}  // namespace train
