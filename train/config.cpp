// Config loading (config.h): the file, then the --set overrides, then one validation pass over the
// merged document. Validation throws a Problem (a JSON pointer and what was expected); load_config turns it
// into a ConfigError naming whoever wrote that field: the file, or the --set override that set it.
#include "train/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <thread>

#include "io/printable.h"
#include "train/tasks.h"

namespace train {
namespace {

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

  void read(const char* key, int& out) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_number_integer()) fail(pointer(key), "expected an integer, got " + describe(value));
    const bool fits = value.is_number_unsigned()
                          ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())
                          : value.get<int64_t>() >= std::numeric_limits<int>::min() &&
                                value.get<int64_t>() <= std::numeric_limits<int>::max();
    if (!fits) fail(pointer(key), "integer out of range, got " + describe(value));
    out = value.get<int>();
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

  // Range checks, with the one-line messages the docs show.
  void at_least(const char* key, int value, int minimum) const {
    if (value < minimum) {
      fail(pointer(key), "must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
    }
  }
  void at_least(const char* key, double value, double minimum) const {
    if (value < minimum)
      fail(pointer(key), "must be >= " + show_number(minimum) + ", got " + show_number(value));
  }
  void not_empty(const char* key, const std::string& value) const {
    if (value.empty()) fail(pointer(key), "must not be empty");
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
  const int task_vocab = make_task(config.task)->vocab_size();
  struct Candidate {
    const char* pointer;
    int value;
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
  root.reject_unknown_keys({"name", "seed", "task", "model", "train", "output"});
  root.read("name", config.name);
  root.not_empty("name", config.name);
  root.read("seed", config.seed);

  // The task first: the model's limits follow from it.
  const Section task = root.section("task");
  task.reject_unknown_keys({"kind", "vocab", "length"});
  TaskConfig& t = config.task;
  task.read("kind", t.kind);
  task.read("vocab", t.vocab);
  task.read("length", t.length);
  if (auto problem = find_task_problem(t)) fail(task.pointer(problem->field.c_str()), problem->message);
  const std::unique_ptr<Task> resolved_task = make_task(t);

  const Section model = root.section("model");
  model.reject_unknown_keys({"d_model", "n_heads", "n_layers", "d_ff", "attention_only", "max_len", "vocab"});
  ModelConfig& m = config.model;
  model.read("d_model", m.d_model);
  model.read("n_heads", m.n_heads);
  model.read("n_layers", m.n_layers);
  model.read("d_ff", m.d_ff);
  model.read("attention_only", m.attention_only);
  model.read("max_len", m.max_len);
  model.read("vocab", m.vocab);
  model.at_least("d_model", m.d_model, 1);
  model.at_least("n_heads", m.n_heads, 1);
  if (m.d_model % m.n_heads != 0) {
    fail(model.pointer("n_heads"),
         std::to_string(m.n_heads) + " does not divide d_model " + std::to_string(m.d_model));
  }
  model.at_least("n_layers", m.n_layers, 1);
  model.at_least("d_ff", m.d_ff, 1);
  const int seq_len = resolved_task->seq_len();
  const int task_vocab = resolved_task->vocab_size();
  if (m.max_len == 0) m.max_len = seq_len;
  if (m.max_len < seq_len) {
    fail(model.pointer("max_len"), std::to_string(m.max_len) +
                                       " is shorter than the task's sequence length " +
                                       std::to_string(seq_len) + " (0 = follow the task)");
  }
  if (m.vocab == 0) m.vocab = task_vocab;
  if (m.vocab < task_vocab) {
    fail(model.pointer("vocab"), std::to_string(m.vocab) + " is smaller than the task's vocabulary " +
                                     std::to_string(task_vocab) + " (0 = follow the task)");
  }

  const Section train = root.section("train");
  train.reject_unknown_keys({"steps", "batch_size", "lr", "warmup", "schedule", "weight_decay", "grad_clip",
                             "threads", "eval_every", "log_every", "eval_size", "memory_limit_gb", "shards"});
  TrainConfig& r = config.train;
  train.read("steps", r.steps);
  train.read("batch_size", r.batch_size);
  train.read("lr", r.lr);
  train.read("warmup", r.warmup);
  train.read("schedule", r.schedule);
  train.read("weight_decay", r.weight_decay);
  train.read("grad_clip", r.grad_clip);
  train.read("threads", r.threads);
  train.read("eval_every", r.eval_every);
  train.read("log_every", r.log_every);
  train.read("eval_size", r.eval_size);
  train.at_least("steps", r.steps, 1);
  train.at_least("batch_size", r.batch_size, 1);
  if (!(r.lr > 0)) fail(train.pointer("lr"), "must be > 0, got " + show_number(r.lr));
  train.at_least("warmup", r.warmup, 0);
  if (r.schedule != "cosine" && r.schedule != "constant") {
    fail(train.pointer("schedule"), "expected \"cosine\" or \"constant\", got \"" + r.schedule + "\"");
  }
  train.at_least("weight_decay", r.weight_decay, 0.0);
  train.at_least("grad_clip", r.grad_clip, 0.0);
  train.at_least("threads", r.threads, 1);
  train.at_least("eval_every", r.eval_every, 1);
  train.at_least("log_every", r.log_every, 1);
  train.at_least("eval_size", r.eval_size, 1);
  train.read("memory_limit_gb", r.memory_limit_gb);
  train.at_least("memory_limit_gb", r.memory_limit_gb, 0.0);
  train.read("shards", r.shards);
  train.at_least("shards", r.shards, 0);
  if (r.shards > r.batch_size) {
    fail(train.pointer("shards"), "must be <= train.batch_size (" + std::to_string(r.batch_size) + "), got " +
                                      std::to_string(r.shards) + " (0 = the default for the model's size)");
  }
  if (r.shards == 0) r.shards = default_shards(config);
  if (for_this_machine && r.threads > max_threads()) {
    fail(train.pointer("threads"), "must be <= " + std::to_string(max_threads()) + " (4 x this machine's " +
                                       std::to_string(max_threads() / 4) + " cores), got " +
                                       std::to_string(r.threads));
  }
  check_memory(config, seq_len);

  const Section output = root.section("output");
  output.reject_unknown_keys({"dir", "attention_every", "probes", "checkpoint_every"});
  OutputConfig& o = config.output;
  o.dir = "runs/" + config.name;
  output.read("dir", o.dir);
  output.not_empty("dir", o.dir);
  output.read("attention_every", o.attention_every);
  output.read("probes", o.probes);
  output.read("checkpoint_every", o.checkpoint_every);
  output.at_least("attention_every", o.attention_every, 0);
  output.at_least("probes", o.probes, 0);
  output.at_least("checkpoint_every", o.checkpoint_every, 0);
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
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw config_error(path + ": cannot open (" + std::strerror(errno) + ")");
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

}  // namespace

double parameter_count(const ModelConfig& m) {
  const double D = m.d_model, F = m.d_ff, V = m.vocab;
  const double attention = 2 * D + 4 * (D * D + D);                         // ln1, wq wk wv wo with biases
  const double mlp = m.attention_only ? 0 : 2 * D + D * F + F + F * D + D;  // ln2, fc1, fc2
  return V * D + static_cast<double>(m.max_len) * D + m.n_layers * (attention + mlp) + 2 * D + D * V + V;
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
  static const std::vector<std::string> fields = {
      "train.steps",     "train.threads",          "train.memory_limit_gb",  "train.eval_every",
      "train.log_every", "output.attention_every", "output.checkpoint_every"};
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
  const std::string text = read_file(path);
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
  if (!document.is_object()) throw config_error(path + ": /: expected an object, got " + describe(document));
  return from_json(document, path, overrides);
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
  const TaskConfig& t = config.task;
  const ModelConfig& m = config.model;
  const TrainConfig& r = config.train;
  const OutputConfig& o = config.output;
  return {
      {"name", config.name},
      {"seed", config.seed},
      {"task", {{"kind", t.kind}, {"vocab", t.vocab}, {"length", t.length}}},
      {"model",
       {{"d_model", m.d_model},
        {"n_heads", m.n_heads},
        {"n_layers", m.n_layers},
        {"d_ff", m.d_ff},
        {"attention_only", m.attention_only},
        {"max_len", m.max_len},
        {"vocab", m.vocab}}},
      {"train",
       {{"steps", r.steps},
        {"batch_size", r.batch_size},
        {"lr", r.lr},
        {"warmup", r.warmup},
        {"schedule", r.schedule},
        {"weight_decay", r.weight_decay},
        {"grad_clip", r.grad_clip},
        {"threads", r.threads},
        {"eval_every", r.eval_every},
        {"log_every", r.log_every},
        {"eval_size", r.eval_size},
        {"memory_limit_gb", r.memory_limit_gb},
        {"shards", r.shards}}},
      {"output",
       {{"dir", o.dir},
        {"attention_every", o.attention_every},
        {"probes", o.probes},
        {"checkpoint_every", o.checkpoint_every}}},
  };
}

bool operator==(const TaskConfig& a, const TaskConfig& b) {
  return a.kind == b.kind && a.vocab == b.vocab && a.length == b.length;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return a.d_model == b.d_model && a.n_heads == b.n_heads && a.n_layers == b.n_layers && a.d_ff == b.d_ff &&
         a.attention_only == b.attention_only && a.max_len == b.max_len && a.vocab == b.vocab;
}

bool operator==(const TrainConfig& a, const TrainConfig& b) {
  return a.steps == b.steps && a.batch_size == b.batch_size && a.lr == b.lr && a.warmup == b.warmup &&
         a.schedule == b.schedule && a.weight_decay == b.weight_decay && a.grad_clip == b.grad_clip &&
         a.threads == b.threads && a.eval_every == b.eval_every && a.log_every == b.log_every &&
         a.eval_size == b.eval_size && a.memory_limit_gb == b.memory_limit_gb && a.shards == b.shards;
}

bool operator==(const OutputConfig& a, const OutputConfig& b) {
  return a.dir == b.dir && a.attention_every == b.attention_every && a.probes == b.probes &&
         a.checkpoint_every == b.checkpoint_every;
}

bool operator==(const Config& a, const Config& b) {
  return a.name == b.name && a.seed == b.seed && a.task == b.task && a.model == b.model &&
         a.train == b.train && a.output == b.output;
}

}  // namespace train
