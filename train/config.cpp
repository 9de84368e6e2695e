// Config loading (config.h): the file, then the --set overrides, then one validation pass over the
// merged document. Validation throws a Problem (a JSON pointer and what was expected); load_config turns it
// into a ConfigError naming whoever wrote that field: the file, or the --set override that set it.
//
// How to add a config field:
//   1. Declare the member, with its type and default, in its section's struct (config.h; the model's in
//      nn/model_shape.h).
//   2. Add one row to the section's table below: the JSON key, the member, what it means (one line), the
//      values it accepts (a range or choice checked right after the section is read, or a rule() that
//      code after the tables' pass checks), kResumable if `train --resume RUN --set` may change it, and
//      what a special default stands for ("0 = the task's T").
//   3. Use its value; run test_train_test_config, which prints docs/configs.md's row for the new field.
// Reading (with its type and range errors), the unknown-key check, to_json, ==, resume_settable_fields()
// and docs/configs.md's field table follow from the row. Rules between fields (n_heads divides d_model,
// max_len covers the task, the memory estimate, the task's own checks) are code in validate().
#include "train/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <thread>
#include <type_traits>
#include <variant>

#include "io/atomic_file.h"
#include "io/printable.h"
#include "train/tasks.h"

namespace train {
namespace {

// The values a field accepts beyond its type, checked as soon as its section is read. `note` says, for the
// docs, what code after that pass checks (a rule between fields, the task's rules).
struct Valid {
  enum Kind { kAny, kRange, kNotEmpty, kOneOf };
  Kind kind = kAny;
  // kRange: value >= low (value > low when !low_inclusive), and value < high when has_high.
  double low = 0, high = 0;
  bool low_inclusive = true, has_high = false;
  std::vector<std::string> choices;  // kOneOf
  std::string note;

  // A range's upper bound, excluded: above(0).below(1) is the open interval (0, 1).
  Valid below(double bound) const {
    Valid valid = *this;
    valid.high = bound;
    valid.has_high = true;
    return valid;
  }
};
Valid at_least(double low, std::string note = "") {
  Valid valid;
  valid.kind = Valid::kRange;
  valid.low = low;
  valid.note = std::move(note);
  return valid;
}
Valid above(double low) {
  Valid valid = at_least(low);
  valid.low_inclusive = false;
  return valid;
}
Valid not_empty() {
  Valid valid;
  valid.kind = Valid::kNotEmpty;
  return valid;
}
Valid one_of(std::vector<std::string> choices) {
  Valid valid;
  valid.kind = Valid::kOneOf;
  valid.choices = std::move(choices);
  return valid;
}
// Nothing to check field by field: the type's range, or a rule that validate() checks after the pass.
Valid rule(std::string note) {
  Valid valid;
  valid.note = std::move(note);
  return valid;
}

enum Resume { kFixed, kResumable };

// One row of a section's table: the JSON key, the member of S it reads into, a one-line meaning, the values
// it accepts, whether a resumed run may change it, and what its default stands for when it is a placeholder.
template <typename S>
struct Field {
  using Member = std::variant<int S::*, int64_t S::*, uint64_t S::*, double S::*, bool S::*, std::string S::*,
                              std::array<double, 2> S::*, nn::NormKind S::*, nn::Activation S::*>;
  const char* key;
  Member member;
  const char* meaning;
  Valid valid = {};
  Resume resume = kFixed;
  const char* default_means = "";  // what the default stands for, when it is a placeholder
};
template <typename S>
using Table = std::vector<Field<S>>;

// The fields at the document's root; the sections follow (for_each_section).
const Table<Config>& root_fields() {
  static const Table<Config> fields = {
      {"name", &Config::name, "the run's name", not_empty()},
      {"seed", &Config::seed, "seeds parameter init and the training data stream", rule("0 .. 2^64-1")},
  };
  return fields;
}

// train/tasks.h checks these (find_task_problem), after the pass: the limits depend on the kind.
const Table<TaskConfig>& task_fields() {
  static const Table<TaskConfig> fields = {
      {"kind", &TaskConfig::kind, "the toy task to train on", rule("a kind of the Tasks table below")},
      {"vocab", &TaskConfig::vocab,
       "value tokens 0..vocab-1, special tokens not counted (the modulus p for modadd)",
       rule("2 .. 1000000, and the task's own rule below")},
      {"length", &TaskConfig::length, "n, the values in the prompt (operands for modadd); text: the window T",
       rule("1 .. 10000 (at least 2 for induction and modadd), and the task's own rule below")},
      {"path", &TaskConfig::path, "the data file of sequences (JSONL) and text (UTF-8); stored absolute",
       rule("a regular file, for sequences and text only")},
      {"vocab_file", &TaskConfig::vocab_file, "sequences: the vocabulary, one token a line, in id order",
       rule("a regular file, for sequences only"), kFixed, "the sorted tokens of the file"},
      {"unit", &TaskConfig::unit, "text: what a token is", one_of({"char", "byte"})},
      {"train_fraction", &TaskConfig::train_fraction,
       "the fraction of a finite dataset trained on, split by the seed; the rest is held out",
       at_least(0).below(1), kFixed,
       "the kind's own split: built-in kinds stream fresh sequences and hold one in five out; text holds "
       "its last 10% out"},
  };
  return fields;
}

// How the model's options (the enums of nn/model_shape.h) are spelled in JSON: one row per value, in the
// order error lines and docs/configs.md list them. Reading, to_json and the docs follow from these rows.
template <typename E>
struct Spelling {
  E value;
  nlohmann::json text;
};
// model.layer_norm keeps its boolean form: true is LayerNorm, false no norm.
const std::vector<Spelling<nn::NormKind>>& spellings(nn::NormKind) {
  static const std::vector<Spelling<nn::NormKind>> rows = {{nn::NormKind::layer, true},
                                                           {nn::NormKind::none, false}};
  return rows;
}
const std::vector<Spelling<nn::Activation>>& spellings(nn::Activation) {
  static const std::vector<Spelling<nn::Activation>> rows = {{nn::Activation::gelu, "gelu"},
                                                             {nn::Activation::relu, "relu"}};
  return rows;
}

const Table<ModelConfig>& model_fields() {
  static const Table<ModelConfig> fields = {
      {"d_model", &ModelConfig::d_model, "width of the residual stream", at_least(1)},
      {"n_heads", &ModelConfig::n_heads, "attention heads per layer", at_least(1, "divides `d_model`")},
      {"n_layers", &ModelConfig::n_layers, "transformer blocks", at_least(1)},
      {"d_ff", &ModelConfig::d_ff, "hidden width of each MLP (unused when `attention_only`)", at_least(1)},
      {"attention_only", &ModelConfig::attention_only, "blocks without LN2 and MLP"},
      {"layer_norm", &ModelConfig::norm,
       "LayerNorm before attention, the MLP and the unembedding; "
       "false: none anywhere (ln1, ln2 and ln_f are the identity)"},
      {"activation", &ModelConfig::activation, "the MLP's nonlinearity (GELU is the tanh approximation)"},
      {"bias", &ModelConfig::bias, "biases in the attention (Wq, Wk, Wv, Wo), MLP and unembedding linears"},
      {"max_len", &ModelConfig::max_len, "size of the position embedding", rule("0, or >= the task's T"),
       kFixed, "the task's T"},
      {"vocab", &ModelConfig::vocab, "rows of the token embedding and the logits",
       rule("0, or >= the task's vocabulary (values + special tokens)"), kFixed, "the task's vocabulary"},
  };
  return fields;
}

const Table<TrainConfig>& train_fields() {
  static const Table<TrainConfig> fields = {
      {"steps", &TrainConfig::steps, "optimizer steps of the whole run", at_least(1), kResumable},
      {"batch_size", &TrainConfig::batch_size,
       "sequences per step; 0 = the whole training set of a finite dataset every step, and every held-out "
       "sequence in each evaluation",
       at_least(0, "0 only for a finite dataset")},
      {"lr", &TrainConfig::lr, "peak learning rate of AdamW", above(0)},
      {"warmup", &TrainConfig::warmup, "steps of linear warmup", at_least(0)},
      {"schedule", &TrainConfig::schedule, "the learning rate after warmup", one_of({"cosine", "constant"})},
      {"weight_decay", &TrainConfig::weight_decay,
       "AdamW's decoupled weight decay, on the parameters `train.decay` names", at_least(0)},
      {"decay", &TrainConfig::decay,
       "the parameters weight decay applies to: \"weights\" the Linear weights only (GPT-2's rule: no "
       "biases, LayerNorm or embeddings), \"all\" every parameter (torch.optim.AdamW's)",
       one_of({"weights", "all"})},
      {"betas", &TrainConfig::betas, "AdamW's moment decay rates [beta1, beta2]", at_least(0).below(1)},
      {"scored_rows_only", &TrainConfig::scored_rows_only,
       "run the last block's MLP and the unembedding on the scored positions only: the same loss and "
       "gradients up to float rounding (fewer rows summed), faster when few positions are scored"},
      {"grad_clip", &TrainConfig::grad_clip, "global gradient norm limit; 0 = no clipping", at_least(0)},
      {"threads", &TrainConfig::threads, "worker threads (results are the same bits for any count)",
       at_least(1, "<= 4 x the machine's cores"), kResumable},
      {"eval_every", &TrainConfig::eval_every, "steps between held-out evaluations", at_least(1), kResumable},
      {"log_every", &TrainConfig::log_every, "steps between lines of `metrics.jsonl`", at_least(1),
       kResumable},
      {"eval_size", &TrainConfig::eval_size, "held-out sequences per evaluation", at_least(1)},
      {"memory_limit_gb", &TrainConfig::memory_limit_gb,
       "configs whose memory estimate is above it are refused", at_least(0), kResumable,
       "the machine's memory"},
      {"shards", &TrainConfig::shards,
       "the batch's rows are split into this many shards, run forward and backward at once, one per thread "
       "(\"Shards and threads\" above)",
       at_least(0, "<= `train.batch_size`"), kFixed,
       "2 for models up to 4M parameters (and batches of 2 or more rows), else 1"},
  };
  return fields;
}

const Table<OutputConfig>& output_fields() {
  static const Table<OutputConfig> fields = {
      {"dir", &OutputConfig::dir, "the run folder", not_empty(), kFixed, "\"runs/\" + `name`"},
      {"attention_every", &OutputConfig::attention_every,
       "steps between attention maps; 0 = none during training", at_least(0), kResumable},
      {"probes", &OutputConfig::probes, "fixed probe inputs whose attention maps are saved", at_least(0)},
      {"measures_every", &OutputConfig::measures_every,
       "steps between the progress measures of a modular-addition run (`measures.jsonl`, docs/grokking.md); "
       "0 = "
       "none",
       at_least(0, "0 unless the task is modadd or modadd_bare with length 2 and an odd vocab, with an MLP"),
       kResumable},
      {"checkpoint_every", &OutputConfig::checkpoint_every, "steps between checkpoints; 0 = only at the end",
       at_least(0), kResumable},
  };
  return fields;
}

// Calls f(key, the section's member of Config, its table) for each section, in the document's order.
template <typename F>
void for_each_section(F&& f) {
  f("task", &Config::task, task_fields());
  f("model", &Config::model, model_fields());
  f("train", &Config::train, train_fields());
  f("output", &Config::output, output_fields());
}

using nlohmann::json;

// A validation failure before it knows its source.
struct Problem {
  std::string pointer;
  std::string message;
};

[[noreturn]] void fail(const std::string& pointer, const std::string& message) {
  throw Problem{pointer, message};
}

// Every error line goes out through here: keys, values and file names from outside are escaped, so the
// line stays one printable line whatever bytes they hold.
ConfigError config_error(const std::string& message) {
  return ConfigError(io::printable(message));
}

// A config file is a few hundred bytes; anything this large is not one (and /dev/zero never ends).
constexpr size_t kMaxConfigBytes = 1 << 20;

// How an error line shows a pointer: the root ("") as "/", so that the line always has three parts.
std::string shown(const std::string& pointer) {
  return pointer.empty() ? "/" : pointer;
}

// RFC 6901: "~" and "/" inside a key are written "~0" and "~1".
std::string escape_key(const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string child(const std::string& pointer, const std::string& key) {
  return pointer + "/" + escape_key(key);
}

// A JSON value as an error line quotes it: short, and saying what kind of value it is.
std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string: {
      // Bytes that are not UTF-8 (from a --set value) would make dump() throw: show them as U+FFFD.
      std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
      if (text.size() > 40) text = text.substr(0, 37) + "...\"";
      return "string " + text;
    }
    default:
      return value.dump();  // numbers, true, false, null
  }
}

// Doubles as a person wrote them: 0.001, 0, -1 (nlohmann's shortest round trip, without a trailing ".0").
std::string show_number(double x) {
  std::string text = json(x).dump();
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

// "a or b", "a, b or c", each in `quote`s: "\"cosine\" or \"constant\"".
std::string choices_text(const std::vector<std::string>& choices, const std::string& quote) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + quote + choices[i] + quote;
  }
  return text;
}

// A kRange as error lines and the docs say it: ">= 1", "> 0 and < 1".
std::string range_text(const Valid& valid) {
  std::string text = (valid.low_inclusive ? ">= " : "> ") + show_number(valid.low);
  if (valid.has_high) text += " and < " + show_number(valid.high);
  return text;
}

// One object of the document (the root or a section) and the readers for its fields. A missing field keeps
// the struct's default; a present one must have the right type.
class Section {
 public:
  Section(const json& object, std::string pointer) : object_(object), pointer_(std::move(pointer)) {
    if (!object_.is_object()) fail(shown(pointer_), "expected an object, got " + describe(object_));
  }

  void reject_unknown_keys(const std::set<std::string>& known) const {
    for (const auto& item : object_.items()) {
      if (!known.count(item.key())) fail(child(pointer_, item.key()), "unknown key");
    }
  }

  bool has(const char* key) const { return object_.contains(key); }
  std::string pointer(const char* key) const { return child(pointer_, key); }

  Section section(const char* key) const {
    static const json empty = json::object();
    return Section(has(key) ? object_.at(key) : empty, pointer(key));
  }

  // int and int64_t fields: any integer their type holds.
  template <typename Integer, std::enable_if_t<std::is_integral_v<Integer>, int> = 0>
  void read(const char* key, Integer& out) const {
    static_assert(std::is_same_v<Integer, int> || std::is_same_v<Integer, int64_t>);
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_number_integer()) fail(pointer(key), "expected an integer, got " + describe(value));
    using Limits = std::numeric_limits<Integer>;
    const bool fits = value.is_number_unsigned()
                          ? value.get<uint64_t>() <= static_cast<uint64_t>(Limits::max())
                          : value.get<int64_t>() >= Limits::min() && value.get<int64_t>() <= Limits::max();
    if (!fits) fail(pointer(key), "integer out of range, got " + describe(value));
    out = value.get<Integer>();
  }

  void read(const char* key, uint64_t& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    // nlohmann parses non-negative literals as unsigned, but a document built in code may hold signed ones.
    if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
      fail(pointer(key), "expected a non-negative integer, got " + describe(value));
    }
    out = value.get<uint64_t>();
  }

  void read(const char* key, double& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_number()) fail(pointer(key), "expected a number, got " + describe(value));
    out = value.get<double>();
    if (!std::isfinite(out)) fail(pointer(key), "expected a finite number, got " + describe(value));
  }

  // [beta1, beta2]-like fields: an array of two finite numbers.
  void read(const char* key, std::array<double, 2>& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_array() || value.size() != 2 || !value[0].is_number() || !value[1].is_number())
      fail(pointer(key), "expected an array of 2 numbers, got " + describe(value));
    for (size_t i = 0; i < 2; ++i) {
      out[i] = value[i].get<double>();
      if (!std::isfinite(out[i])) fail(pointer(key), "expected finite numbers, got " + value.dump());
    }
  }

  void read(const char* key, bool& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_boolean()) fail(pointer(key), "expected true or false, got " + describe(value));
    out = value.get<bool>();
  }

  void read(const char* key, std::string& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_string()) fail(pointer(key), "expected a string, got " + describe(value));
    out = value.get<std::string>();
    // Strings go into config.json, file names and terminal lines: no control bytes, nothing but UTF-8.
    if (!io::is_printable_utf8(out))
      fail(pointer(key), "expected UTF-8 text without control characters, got " + describe(value));
  }

  // The model's options: one of the type's spellings.
  template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  void read(const char* key, E& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    for (const auto& row : spellings(E{})) {
      if (value == row.text) {
        out = row.value;
        return;
      }
    }
    std::vector<std::string> choices;
    for (const auto& row : spellings(E{})) choices.push_back(row.text.dump());
    fail(pointer(key), "expected " + choices_text(choices, "") + ", got " + describe(value));
  }

  // A field's Valid, with the one-line messages the docs show.
  template <typename V>
  void check(const char* key, const V& value, const Valid& valid) const {
    if (valid.kind == Valid::kAny) return;
    if constexpr (std::is_same_v<V, std::array<double, 2>>) {
      // A range applies to each element.
      if (valid.kind == Valid::kRange) {
        for (size_t i = 0; i < value.size(); ++i) {
          const bool low_ok = valid.low_inclusive ? value[i] >= valid.low : value[i] > valid.low;
          if (!low_ok || (valid.has_high && value[i] >= valid.high))
            fail(pointer(key) + "/" + std::to_string(i),
                 "must be " + range_text(valid) + ", got " + show_number(value[i]));
        }
        return;
      }
    } else if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
      if (valid.kind == Valid::kRange) {
        const bool low_ok = valid.low_inclusive ? value >= valid.low : value > valid.low;
        const bool high_ok = !valid.has_high || value < valid.high;
        if (!low_ok || !high_ok) {
          const std::string got = std::is_integral_v<V> ? json(value).dump() : show_number(value);
          fail(pointer(key), "must be " + range_text(valid) + ", got " + got);
        }
        return;
      }
    } else if constexpr (std::is_same_v<V, std::string>) {
      if (valid.kind == Valid::kNotEmpty && value.empty()) fail(pointer(key), "must not be empty");
      if (valid.kind == Valid::kOneOf &&
          std::find(valid.choices.begin(), valid.choices.end(), value) == valid.choices.end()) {
        fail(pointer(key), "expected " + choices_text(valid.choices, "\"") + ", got \"" + value + "\"");
      }
      if (valid.kind == Valid::kNotEmpty || valid.kind == Valid::kOneOf) return;
    }
    throw std::logic_error("config field " + pointer(key) + ": its table row asks a check its type lacks");
  }

  // The table's fields of `s`, read and checked; any other key but `more_keys` (the root's sections) is an
  // error. A field absent from the document keeps the value `s` holds.
  template <typename S>
  void read_fields(const Table<S>& fields, S& s, const std::vector<std::string>& more_keys = {}) const {
    std::set<std::string> known(more_keys.begin(), more_keys.end());
    for (const Field<S>& field : fields) known.insert(field.key);
    reject_unknown_keys(known);
    for (const Field<S>& field : fields)
      std::visit([&](auto member) { read(field.key, s.*member); }, field.member);
    for (const Field<S>& field : fields)
      std::visit([&](auto member) { check(field.key, s.*member, field.valid); }, field.member);
  }

 private:
  const json& object_;
  std::string pointer_;
};

// The bytes of this machine's memory (a large default when the system does not say).
double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size) : 64e9;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes < 1e13 ? "%.1f GB" : "%.3g GB", bytes / 1e9);
  return text;
}

// What train.shards = 0 resolves to (config.h, kAutoShards).
int default_shards(const Config& config) {
  return config.train.batch_size >= kAutoShards && parameter_count(config.model) <= kAutoShardsMaxParameters
             ? kAutoShards
             : 1;
}

// Refuses a config whose memory estimate is over train.memory_limit_gb, naming the field that contributes
// most: the one whose reset to its default (or the task's size) would shrink the estimate the most.
void check_memory(const Config& config, int seq_len) {
  const double limit =
      config.train.memory_limit_gb > 0 ? config.train.memory_limit_gb * 1e9 : physical_memory_bytes();
  const double needed = estimate_memory_bytes(config, seq_len);
  if (needed <= limit) return;
  const Config defaults;
  const int task_vocab = make_task(config.task, config.seed)->vocab_size();
  struct Candidate {
    const char* pointer;
    int64_t value;
    std::function<void(Config&, int&)> reset;
  };
  const std::vector<Candidate> candidates = {
      {"/model/vocab", config.model.vocab, [&](Config& c, int&) { c.model.vocab = task_vocab; }},
      {"/model/d_model", config.model.d_model,
       [&](Config& c, int&) { c.model.d_model = std::min(c.model.d_model, defaults.model.d_model); }},
      {"/model/max_len", config.model.max_len, [&](Config& c, int& t) { c.model.max_len = t; }},
      {"/model/d_ff", config.model.d_ff,
       [&](Config& c, int&) { c.model.d_ff = std::min(c.model.d_ff, defaults.model.d_ff); }},
      {"/model/n_layers", config.model.n_layers,
       [&](Config& c, int&) { c.model.n_layers = std::min(c.model.n_layers, defaults.model.n_layers); }},
      {"/model/n_heads", config.model.n_heads,
       [&](Config& c, int&) { c.model.n_heads = std::min(c.model.n_heads, defaults.model.n_heads); }},
      {"/train/batch_size", config.train.batch_size,
       [&](Config& c, int&) {
         c.train.batch_size = std::min(c.train.batch_size, defaults.train.batch_size);
       }},
      {"/train/shards", config.train.shards,
       [&](Config& c, int&) { c.train.shards = std::min(c.train.shards, default_shards(c)); }},
      {"/train/eval_size", config.train.eval_size,
       [&](Config& c, int&) { c.train.eval_size = std::min(c.train.eval_size, defaults.train.eval_size); }},
      {"/task/length", config.task.length,
       [&](Config&, int& t) { t = std::min(t, 2 * defaults.task.length + 1); }},
  };
  const Candidate* blamed = &candidates.front();
  double best = -1;
  for (const Candidate& candidate : candidates) {
    Config smaller = config;
    int t = seq_len;
    candidate.reset(smaller, t);
    const double saved = needed - estimate_memory_bytes(smaller, t);
    if (saved > best) {
      best = saved;
      blamed = &candidate;
    }
  }
  const std::string over = "about " + gigabytes(needed) + " of memory (an estimate), over the limit of " +
                           gigabytes(limit) +
                           (config.train.memory_limit_gb > 0
                                ? " (train.memory_limit_gb)"
                                : " (this machine's memory; raise it with --set train.memory_limit_gb=N)");
  // Every size at its default or below: the limit itself is what is too small.
  if (best <= 0) fail("/train/memory_limit_gb", "the run needs " + over);
  fail(blamed->pointer, std::to_string(blamed->value) + " makes the run need " + over);
}

// `for_this_machine`: also check the limits of the machine that will train (train.threads); a checkpoint's
// config, read to evaluate or study the run, may come from a larger machine.
Config validate(const json& document, bool for_this_machine) {
  Config config;
  const Section root(document, "");
  std::vector<std::string> sections;
  for_each_section([&](const char* key, auto, const auto&) { sections.push_back(key); });
  root.read_fields(root_fields(), config, sections);

  // The task first: the model's limits follow from it.
  const Section task = root.section("task");
  task.read_fields(task_fields(), config.task);
  if (auto problem = find_task_problem(config.task))
    fail(task.pointer(problem->field.c_str()), problem->message);
  for (std::string* file : {&config.task.path, &config.task.vocab_file}) {
    std::error_code ec;
    if (!file->empty()) *file = std::filesystem::absolute(*file, ec).lexically_normal().string();
  }
  std::unique_ptr<Task> resolved_task;
  try {
    resolved_task = make_task(config.task, config.seed);
  } catch (const TaskDataError& e) {
    fail(task.pointer(e.field().c_str()), e.message());
  }

  const Section model = root.section("model");
  ModelConfig& m = config.model;
  model.read_fields(model_fields(), m);
  if (m.d_model % m.n_heads != 0) {
    fail(model.pointer("n_heads"),
         std::to_string(m.n_heads) + " does not divide d_model " + std::to_string(m.d_model));
  }
  const int seq_len = resolved_task->seq_len();
  const int task_vocab = resolved_task->vocab_size();
  if (m.max_len == 0) m.max_len = seq_len;
  if (m.max_len < seq_len) {
    const std::string note = resolved_task->longest_sequence_note();
    fail(model.pointer("max_len"),
         std::to_string(m.max_len) + " is shorter than the task's sequence length " +
             std::to_string(seq_len) + (note.empty() ? "" : " (" + note + ")") + " (0 = follow the task)");
  }
  if (m.vocab == 0) m.vocab = task_vocab;
  if (m.vocab < task_vocab) {
    fail(model.pointer("vocab"), std::to_string(m.vocab) + " is smaller than the task's vocabulary " +
                                     std::to_string(task_vocab) + " (0 = follow the task)");
  }

  const Section train = root.section("train");
  TrainConfig& r = config.train;
  train.read_fields(train_fields(), r);
  if (r.batch_size == 0 && !resolved_task->finite()) {
    fail(train.pointer("batch_size"),
         "0 (the whole training set) needs a finite dataset: task.train_fraction, or a sequences file");
  }
  // Sizes follow the rows a step really has: batch_size 0 is the whole training set.
  Config sized = config;
  if (r.batch_size == 0) {
    sized.train.batch_size = static_cast<int>(resolved_task->split_size(false));
    r.eval_size = static_cast<int>(resolved_task->split_size(true));
    sized.train.eval_size = r.eval_size;
  }
  if (r.shards > sized.train.batch_size) {
    fail(train.pointer("shards"), "must be <= the rows of a step (" + std::to_string(sized.train.batch_size) +
                                      "), got " + std::to_string(r.shards) +
                                      " (0 = the default for the model's size)");
  }
  if (r.shards == 0) r.shards = default_shards(sized);
  sized.train.shards = r.shards;
  if (for_this_machine && r.threads > max_threads()) {
    fail(train.pointer("threads"), "must be <= " + std::to_string(max_threads()) + " (4 x this machine's " +
                                       std::to_string(max_threads() / 4) + " cores), got " +
                                       std::to_string(r.threads));
  }
  check_memory(sized, seq_len);

  config.output.dir = "runs/" + config.name;  // unless the document says otherwise
  const Section output = root.section("output");
  output.read_fields(output_fields(), config.output);
  const TaskConfig& t = config.task;
  if (config.output.measures_every > 0 && ((t.kind != "modadd" && t.kind != "modadd_bare") || t.length != 2 ||
                                           t.vocab % 2 == 0 || m.attention_only)) {
    fail(output.pointer("measures_every"),
         "the progress measures read modular addition: task.kind modadd or modadd_bare with length 2, an odd "
         "task.vocab and a model with an MLP (0 = none)");
  }
  return config;
}

// Parses JSON text; duplicate keys (which nlohmann would silently resolve to the last one) are a Problem at
// the duplicated key's pointer. Malformed text throws nlohmann's parse_error.
json parse_rejecting_duplicates(const std::string& text) {
  // One frame per open object or array: an object's keys so far and its current key; an array's index.
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string current_key;
    int index = 0;
  };
  std::vector<Frame> frames;
  const auto pointer_of_open_frames = [&frames]() {
    std::string pointer;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      pointer +=
          frames[i].is_object ? child("", frames[i].current_key) : "/" + std::to_string(frames[i].index);
    }
    return pointer;
  };
  const auto finished_value = [&frames]() {
    if (!frames.empty() && !frames.back().is_object) ++frames.back().index;
  };
  json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames.push_back({true, {}, {}, 0});
        break;
      case json::parse_event_t::array_start:
        frames.push_back({false, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Frame& frame = frames.back();
        const std::string key = parsed.get<std::string>();
        if (!frame.keys.insert(key).second) fail(child(pointer_of_open_frames(), key), "duplicate key");
        frame.current_key = key;
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames.pop_back();
        finished_value();
        break;
      case json::parse_event_t::value:
        finished_value();
        break;
    }
    return true;
  };
  return json::parse(text, callback);
}

// "line L, column C" of a byte offset into the text; nlohmann's parse_error gives the count of bytes read,
// so the offending byte is the last of them.
std::string line_and_column(const std::string& text, size_t bytes_read) {
  const size_t offending = std::min(bytes_read > 0 ? bytes_read - 1 : 0, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offending; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offending - line_start + 1);
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>"; keep the
// detail, since the position is computed from the text.
std::string parse_error_detail(const json::parse_error& error) {
  const std::string what = error.what();
  const size_t at = what.find("parse error");
  const size_t colon = what.find(": ", at == std::string::npos ? 0 : at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

std::string read_file(const std::string& path) {
  int fd = -1;
  try {
    fd = io::open_regular_file(path);  // a FIFO or device is refused rather than read for ever
  } catch (const std::runtime_error& e) {
    throw config_error(e.what());
  }
  std::FILE* file = fd < 0 ? nullptr : ::fdopen(fd, "rb");
  if (!file) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw config_error(path + ": cannot open (" + std::strerror(error) + ")");
  }
  std::string text;
  char buffer[1 << 14];
  size_t count;
  while (text.size() <= kMaxConfigBytes && (count = std::fread(buffer, 1, sizeof buffer, file)) > 0)
    text.append(buffer, count);
  const bool failed = std::ferror(file);
  const int error = errno;
  std::fclose(file);
  if (failed) throw config_error(path + ": cannot read (" + std::strerror(error) + ")");
  if (text.size() > kMaxConfigBytes)
    throw config_error(path + ": larger than " + std::to_string(kMaxConfigBytes >> 20) +
                       " MiB, not a config file");
  return text;
}

// The pointer of every field and section a --set may name: "/train", "/train/steps", ...
std::set<std::string> settable_pointers() {
  std::set<std::string> pointers;
  const json defaults = to_json(Config{});  // named: items() of a temporary would dangle in the loop
  for (const auto& item : defaults.items()) {
    pointers.insert(child("", item.key()));
    if (item.value().is_object()) {
      for (const auto& field : item.value().items())
        pointers.insert(child(child("", item.key()), field.key()));
    }
  }
  return pointers;
}

struct Override {
  std::string text;     // as given, for error lines: "train.steps=100"
  std::string pointer;  // "/train/steps"
  json value;
};

Override parse_override(const std::string& text) {
  const std::string label = "--set " + text;
  const size_t equals = text.find('=');
  const std::string path = text.substr(0, equals);
  if (equals == std::string::npos || path.empty() || path.front() == '.' || path.back() == '.' ||
      path.find("..") != std::string::npos) {
    throw config_error(label + ": expected key.path=value, e.g. train.steps=100");
  }
  Override parsed{text, "", {}};
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parsed.pointer = child(parsed.pointer, path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  static const std::set<std::string> settable = settable_pointers();
  if (!settable.count(parsed.pointer)) throw config_error(label + ": " + parsed.pointer + ": unknown key");
  const std::string value = text.substr(equals + 1);
  parsed.value = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.value.is_discarded()) parsed.value = value;  // not JSON: a plain string such as copy or runs/x
  return parsed;
}

// Writes the override into the document, creating its section when the file has none.
void apply_override(json& document, const Override& override, const std::string& path) {
  json* node = &document;
  std::string pointer;
  size_t start = 1;
  while (true) {
    const size_t slash = override.pointer.find('/', start);
    const std::string key =
        override.pointer.substr(start, slash - start);  // settable keys need no unescaping
    if (slash == std::string::npos) {
      (*node)[key] = override.value;
      return;
    }
    pointer = child(pointer, key);
    node = &(*node)[key];
    if (!node->is_null() && !node->is_object()) {
      throw config_error(path + ": " + pointer + ": expected an object, got " + describe(*node));
    }
    if (node->is_null()) *node = json::object();
    start = slash + 1;
  }
}

// Whether `pointer` is `prefix` or inside it, segment-wise ("/train/steps" is inside "/train", "/trainx" is
// not).
bool is_within(const std::string& pointer, const std::string& prefix) {
  return pointer.compare(0, prefix.size(), prefix) == 0 &&
         (pointer.size() == prefix.size() || pointer[prefix.size()] == '/');
}

// A member's value in JSON: an option (an enum) as its spelling.
template <typename V>
json json_of(const V& value) {
  if constexpr (std::is_enum_v<V>) {
    for (const auto& row : spellings(value))
      if (row.value == value) return row.text;
    throw std::logic_error("config: an option value without a spelling");
  } else {
    return value;
  }
}

// The fields of `s` as a JSON object, one key per row.
template <typename S>
json fields_to_json(const Table<S>& fields, const S& s) {
  json object = json::object();
  for (const Field<S>& field : fields)
    std::visit([&](auto member) { object[field.key] = json_of(s.*member); }, field.member);
  return object;
}

template <typename S>
bool fields_equal(const Table<S>& fields, const S& a, const S& b) {
  for (const Field<S>& field : fields) {
    if (!std::visit([&](auto member) { return a.*member == b.*member; }, field.member)) return false;
  }
  return true;
}

// A member's type as the docs name it (an option's, its spellings' type).
template <typename V>
std::string type_name() {
  if constexpr (std::is_enum_v<V>) return spellings(V{}).front().text.is_boolean() ? "boolean" : "string";
  if constexpr (std::is_same_v<V, bool>) return "boolean";
  if constexpr (std::is_integral_v<V>) return "integer";
  if constexpr (std::is_floating_point_v<V>) return "number";
  if constexpr (std::is_same_v<V, std::array<double, 2>>) return "array of 2 numbers";
  return "string";
}

// What docs/configs.md's "valid" column says of a row.
std::string valid_text(const Valid& valid) {
  std::string text;
  if (valid.kind == Valid::kRange) text = range_text(valid);
  if (valid.kind == Valid::kNotEmpty) text = "not empty";
  if (valid.kind == Valid::kOneOf) text = choices_text(valid.choices, "`");
  if (!valid.note.empty()) text += (text.empty() ? "" : ", ") + valid.note;
  return text.empty() ? "any" : text;
}

template <typename S>
void add_field_infos(std::vector<FieldInfo>& infos, const std::string& section, const Table<S>& fields) {
  const S defaults{};
  for (const Field<S>& field : fields) {
    std::visit(
        [&](auto member) {
          using V = std::remove_reference_t<decltype(defaults.*member)>;
          const V& value = defaults.*member;
          std::string shown, valid = valid_text(field.valid);
          if constexpr (std::is_floating_point_v<V>) {
            shown = show_number(value);
          } else {
            shown = json_of(value).dump();
          }
          if constexpr (std::is_enum_v<V>) {  // an option spelled as strings: those; as booleans: any
            std::vector<std::string> choices;
            for (const auto& row : spellings(value))
              if (row.text.is_string()) choices.push_back(row.text.template get<std::string>());
            if (!choices.empty()) valid = choices_text(choices, "`");
          }
          infos.push_back({section.empty() ? field.key : section + "." + field.key,
                           type_name<std::decay_t<V>>(), shown, field.default_means, valid, field.meaning,
                           field.resume == kResumable});
        },
        field.member);
  }
}

}  // namespace

double parameter_count(const ModelConfig& m) {
  const double D = m.d_model, F = m.d_ff, V = m.vocab;
  // A norm's weight and its bias, where it has them.
  const double ln = D * ((nn::has_norm(m.norm) ? 1 : 0) + (nn::norm_has_bias(m.norm) ? 1 : 0));
  const double b = m.bias ? 1 : 0;
  const double attention = ln + 4 * (D * D + b * D);                             // ln1, wq wk wv wo
  const double mlp = m.attention_only ? 0 : ln + D * F + b * F + F * D + b * D;  // ln2, fc1, fc2
  return V * D + static_cast<double>(m.max_len) * D + m.n_layers * (attention + mlp) + ln + D * V + b * V;
}

double estimate_memory_bytes(const Config& config, int seq_len) {
  const ModelConfig& m = config.model;
  const double D = m.d_model, F = m.attention_only ? 0 : m.d_ff, V = m.vocab, H = m.n_heads, T = seq_len;
  // Weights, gradients and AdamW's m and v, all float; each shard after the first, a copy of the weights
  // and its own gradients.
  const double parameters = (16 + 8 * std::max(0, config.train.shards - 1)) * parameter_count(m);
  // Per token and layer, the values autograd keeps (LayerNorm outputs, q k v, context, projections,
  // residual sums, the MLP's two hidden layers, H rows of scores and weights), each with its gradient;
  // then the logits and their softmax.
  const double per_token = m.n_layers * (11 * D + 2 * F + 2 * H * T) + 2 * V + 3 * D;
  const double activations = 8.0 * config.train.batch_size * T * per_token;
  const double held_out = 8.0 * config.train.eval_size * (T + 1);
  return parameters + activations + held_out;
}

int max_threads() {
  return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

const std::vector<std::string>& resume_settable_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> paths;
    for (const FieldInfo& field : config_fields())
      if (field.resume_settable) paths.push_back(field.path);
    return paths;
  }();
  return fields;
}

void check_resume_overrides(const std::vector<std::string>& overrides) {
  for (const std::string& text : overrides) {
    const Override parsed = parse_override(text);
    bool allowed = false;
    for (const std::string& field : resume_settable_fields()) {
      std::string pointer = "/" + field;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      allowed = allowed || parsed.pointer == pointer;
    }
    if (!allowed) {
      std::string list;
      for (const std::string& field : resume_settable_fields()) list += (list.empty() ? "" : ", ") + field;
      throw config_error("--set " + text + ": " + parsed.pointer +
                         ": cannot change when resuming (the checkpoint was trained with it); only " + list +
                         " can");
    }
  }
}

Config from_json(const nlohmann::json& document, const std::string& source) {
  try {
    return validate(document, false);
  } catch (const Problem& problem) {
    throw config_error(source + ": " + shown(problem.pointer) + ": " + problem.message);
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  const json document = parse_json_text(read_file(path), path);
  if (!document.is_object()) throw config_error(path + ": /: expected an object, got " + describe(document));
  return from_json(document, path, overrides);
}

json parse_json_text(const std::string& text, const std::string& path) {
  json document;
  try {
    document = parse_rejecting_duplicates(text);
  } catch (const json::parse_error& error) {
    throw config_error(path + ": " + line_and_column(text, error.byte) + ": malformed JSON (" +
                       parse_error_detail(error) + ")");
  } catch (const json::out_of_range& error) {
    // A number beyond double's range ("number overflow parsing '1e400'"): nlohmann gives no position,
    // so point at the first occurrence of the number's text.
    const std::string what = error.what();
    const size_t quote = what.find('\'');
    const std::string number =
        quote == std::string::npos ? "" : what.substr(quote + 1, what.size() - quote - 2);
    const size_t at = number.empty() ? std::string::npos : text.find(number);
    throw config_error(path + ": " + (at == std::string::npos ? "" : line_and_column(text, at + 1) + ": ") +
                       "number " + number + " is out of range");
  } catch (const Problem& problem) {
    throw config_error(path + ": " + shown(problem.pointer) + ": " + problem.message);
  }
  return document;
}

Config from_json(nlohmann::json document, const std::string& source,
                 const std::vector<std::string>& overrides) {
  std::vector<Override> parsed;
  for (const std::string& text_of_override : overrides) {
    parsed.push_back(parse_override(text_of_override));
    apply_override(document, parsed.back(), source);
  }

  try {
    return validate(document, true);
  } catch (const Problem& problem) {
    // The last override that wrote this field (or a section holding it) is where the bad value came from.
    for (auto it = parsed.rbegin(); it != parsed.rend(); ++it) {
      if (is_within(problem.pointer, it->pointer)) {
        throw config_error("--set " + it->text + ": " + shown(problem.pointer) + ": " + problem.message);
      }
    }
    throw config_error(source + ": " + shown(problem.pointer) + ": " + problem.message);
  }
}

nlohmann::json to_json(const Config& config) {
  json document = fields_to_json(root_fields(), config);
  for_each_section([&](const char* key, auto section, const auto& fields) {
    document[key] = fields_to_json(fields, config.*section);
  });
  return document;
}

const std::vector<FieldInfo>& config_fields() {
  static const std::vector<FieldInfo> fields = [] {
    std::vector<FieldInfo> infos;
    add_field_infos(infos, "", root_fields());
    for_each_section([&](const char* key, auto, const auto& table) { add_field_infos(infos, key, table); });
    return infos;
  }();
  return fields;
}

bool operator==(const TaskConfig& a, const TaskConfig& b) {
  return fields_equal(task_fields(), a, b);
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return fields_equal(model_fields(), a, b);
}

bool operator==(const TrainConfig& a, const TrainConfig& b) {
  return fields_equal(train_fields(), a, b);
}

bool operator==(const OutputConfig& a, const OutputConfig& b) {
  return fields_equal(output_fields(), a, b);
}

bool operator==(const Config& a, const Config& b) {
  bool equal = fields_equal(root_fields(), a, b);
  for_each_section([&](const char*, auto section, const auto& fields) {
    equal = equal && fields_equal(fields, a.*section, b.*section);
  });
  return equal;
}

}  // namespace train
