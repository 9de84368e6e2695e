// The run configuration: typed structs with their defaults, loading from a JSON file plus --set
// overrides, validation of every field, and the resolved JSON written to RUN/config.json.
// Each member below (and of nn::ModelShape, the model section) has one row in its section's field table in
// train/config_schema.cpp, which says how to add a field; parsing, checks, to_json, == and docs/configs.md's
// field table follow from those rows (io/field_table.h). Loading and --set: train/config_load.cpp; the
// machine's limits (memory, threads): train/machine_checks.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/field_info.h"
#include "io/json_read.h"
#include "nn/model_shape.h"

namespace train {

// A bad config: the message is one line, `<file>: <JSON pointer>: <what was expected>`, e.g.
// `configs/x.json: /model/n_heads: 3 does not divide d_model 64`. The command line prints it and exits 2.
// A JsonError like every other JSON input's problem (io/json_read.h), with the same messages.
class ConfigError : public io::JsonError {
 public:
  using io::JsonError::JsonError;
};

// Which toy task to train on; train/tasks.h defines each kind's format and what `vocab` and `length` mean.
struct TaskConfig {
  TaskConfig() = default;
  // A built-in kind at a vocabulary and length, every other field at its default.
  TaskConfig(std::string kind_, int vocab_, int length_)
      : kind(std::move(kind_)), vocab(vocab_), length(length_) {}

  std::string kind = "reverse";
  // The number of value tokens 0..vocab-1 (the modulus p for modadd), special tokens not included.
  int vocab = 10;
  int length = 8;  // number of values in the prompt (operands for modadd, tokens for random)
  // The data file of the kinds that read one (sequences: JSONL; text: UTF-8 text). A relative path is taken
  // from the current folder and stored absolute, so the run's config.json finds it from anywhere.
  std::string path;
  std::string vocab_file;     // sequences: the vocabulary, one token a line; empty = the file's tokens
  std::string unit = "char";  // text: "char" (each distinct character a token), "byte" or "bpe"
  // The byte-level BPE tokenizer (train/tokenizer.h) of text with unit "bpe" (a path like task.path, stored
  // absolute) and of pretrained (a path relative to the run folder, e.g. "tokenizer.json", kept as written).
  std::string tokenizer;
  // The fraction of a finite dataset trained on, the rest held out, split by the seed; 0 = the kind's own
  // split (a built-in kind's endless stream with its fixed hold-out; text: the last 10% held out).
  double train_fraction = 0;
};

// The model section: the model's shape (max_len and vocab 0 = the task's sequence length and vocabulary,
// special tokens included, resolved by load_config / from_json), and where its weights start.
struct ModelConfig : nn::ModelShape {
  ModelConfig() = default;
  ModelConfig(const nn::ModelShape& shape) : nn::ModelShape(shape) {}  // NOLINT: a shape is a section
  // A run folder (an imported model's, or any run's) whose checkpoint/model.safetensors the training
  // starts from instead of the random init; its model section must equal this one (train/checkpoint.h).
  // Empty: the random init. A relative path is taken from the current folder and stored absolute.
  std::string init_from;
};

struct TrainConfig {
  int steps = 3000;
  int batch_size = 64;
  double lr = 0.001;
  int warmup = 100;                 // linear warmup steps
  std::string schedule = "cosine";  // "cosine" or "constant" after warmup
  double weight_decay = 0.01;
  std::string decay = "weights";            // which parameters weight decay applies to: "weights" or "all"
  std::array<double, 2> betas{0.9, 0.999};  // AdamW's (beta1, beta2)
  std::string optimizer = "adamw";          // "adamw", or "muon" for the hidden matrices (train/optimizer.h)
  double muon_lr = 0.02;                    // Muon's peak learning rate, on train.lr's schedule
  bool scored_rows_only = false;            // nn::training_forward_rows on the scored rows
  double grad_clip = 1.0;                   // global gradient norm limit; 0 = no clipping
  int threads = 2;
  int eval_every = 250;
  int log_every = 50;
  int eval_size = 512;  // held-out sequences per evaluation
  // The batch is split by rows into this many shards, each run forward and backward on its own copy of the
  // model by its own thread, the gradients summed in shard order (train/batch_shards.h). It changes the
  // bits of the gradients (not their meaning), so it is part of the run; the thread count is not. 0 = the
  // default for the model's size (kAutoShards), resolved by load_config / from_json.
  int shards = 0;
  // The memory estimate_memory_bytes may reach before the config is refused; 0 = this machine's physical
  // memory.
  double memory_limit_gb = 0;
};

struct OutputConfig {
  std::string dir = "runs/reverse";  // when absent from the JSON: "runs/" + name
  int attention_every = 500;         // 0 = no attention maps during training
  int probes = 4;                    // fixed probe inputs whose attention maps are saved
  int checkpoint_every = 1000;       // 0 = a checkpoint only at the end
  int measures_every = 0;            // modular addition: steps between progress measures; 0 = none
};

struct Config {
  std::string name = "reverse";
  uint64_t seed = 42;
  TaskConfig task;
  ModelConfig model;
  TrainConfig train;
  OutputConfig output;
};

// Reads the JSON file at `path`, applies `overrides` ("key.path=value", from --set; the value is parsed as
// JSON when it parses, otherwise taken as a string), validates everything and resolves model.max_len and
// model.vocab from the task. Throws ConfigError naming the file (or the override) and the JSON pointer.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Validates a config document (missing fields take their defaults) and resolves it as load_config does;
// errors name `source` as the file. Used for configs that are not files, e.g. a checkpoint's metadata, so
// it skips the limits of this machine (train.threads), which a run trained elsewhere may exceed.
Config from_json(const nlohmann::json& document, const std::string& source = "<config>");

// A config document with --set overrides applied, validated and resolved as load_config does (this
// machine's limits included); errors name `source` or the override that wrote the bad field. Used to resume
// a run from its stored config.
Config from_json(nlohmann::json document, const std::string& source,
                 const std::vector<std::string>& overrides);

// Parses JSON text as load_config does (io::parse_json_text, thrown as a ConfigError): malformed text, a
// NUL byte, nesting deeper than 64 levels, numbers beyond double's range and duplicate keys are a
// ConfigError "SOURCE: line L, column C: ..." (or "SOURCE: /POINTER: duplicate key").
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// The resolved config with every field present; from_json(to_json(c)) == c.
nlohmann::json to_json(const Config& config);

// The number of parameters the config's model has (as a double: a hostile config may exceed int64).
double parameter_count(const ModelConfig& model);

// About how many bytes training with this config needs at its peak: weights, gradients and AdamW's two
// moments, the activations (and their gradients) of one batch, and the held-out set. `seq_len` is the
// task's input length T. An estimate, for refusing configs that cannot fit before anything is allocated.
double estimate_memory_bytes(const Config& config, int seq_len);

// train.shards = 0 resolves to this many shards when the batch has at least that many rows and the model has
// at most kAutoShardsMaxParameters parameters (above that, each shard's copy of the weights and gradients
// costs more memory than the split gains in speed); otherwise to 1.
constexpr int kAutoShards = 2;
constexpr double kAutoShardsMaxParameters = 4e6;

// The most threads train.threads may ask for: 4 x this machine's cores.
int max_threads();

// The fields `attograd train --resume RUN --set ...` may change: those that change neither the model, the
// data nor the meaning of the logged numbers (train.steps, train.threads, ...; the tables in
// config_schema.cpp mark them).
const std::vector<std::string>& resume_settable_fields();
// Throws ConfigError "--set task.kind=copy: /task/kind: cannot change when resuming ..." for the first
// override that names another field (or is malformed).
void check_resume_overrides(const std::vector<std::string>& overrides);

// One field of the tables in config_schema.cpp, as docs/configs.md's field table shows it.
using FieldInfo = io::FieldInfo;
// Every field, root fields first, then the task, model, train and output sections, each in table order.
const std::vector<FieldInfo>& config_fields();

// Field by field, as the tables list them (ModelConfig's is here: nn::ModelShape has none of its own).
bool operator==(const TaskConfig& a, const TaskConfig& b);
bool operator==(const ModelConfig& a, const ModelConfig& b);
bool operator==(const TrainConfig& a, const TrainConfig& b);
bool operator==(const OutputConfig& a, const OutputConfig& b);
bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) {
  return !(a == b);
}

}  // namespace train
