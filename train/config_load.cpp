// Config loading (config.h): the file, then the --set overrides, then one validation pass over the
// merged document. Validation throws an io::FieldProblem (a JSON pointer and what was expected);
// load_config turns it into a ConfigError naming whoever wrote that field: the file, or the --set override
// that set it. The tables are config_schema.cpp's; the machine's limits machine_checks.cpp's.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "io/json_read.h"
#include "io/printable.h"
#include "train/config_tables.h"
#include "train/tasks.h"

namespace train {
namespace {

using io::child;
using io::describe;
using io::Section;
using io::shown;
using nlohmann::json;

// model.norm's older spelling, a boolean, still read (and settable with --set) but never written.
constexpr const char* kLayerNormKey = "layer_norm";

[[noreturn]] void fail(const std::string& pointer, const std::string& message) {
  io::field_fail(pointer, message);
}

// Every error line goes out through here: keys, values and file names from outside are escaped, so the
// line stays one printable line whatever bytes they hold.
ConfigError config_error(const std::string& message) {
  return ConfigError(io::printable(message));
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
  // A config to train (this machine's, or a resume's) needs data: refused before a run folder is made.
  if (for_this_machine && task_is_data_less(config.task))
    fail(task.pointer("kind"), "\"" + config.task.kind +
                                   "\" has no training data (an imported model's task); train on a text task "
                                   "(unit \"bpe\", the same tokenizer)");
  // pretrained's tokenizer stays relative to the run folder it is in.
  const bool in_run_folder = task_needs_run_folder(config.task);
  for (std::string* file : {&config.task.path, &config.task.vocab_file, &config.task.tokenizer}) {
    std::error_code ec;
    if (!file->empty() && !(in_run_folder && file == &config.task.tokenizer))
      *file = std::filesystem::absolute(*file, ec).lexically_normal().string();
  }
  // A task that reads the run folder is built by load_run, which knows the folder; here its T is
  // task.length and its vocabulary model.vocab, which must then be given.
  std::unique_ptr<Task> resolved_task;
  if (!in_run_folder) {
    try {
      resolved_task = make_task(config.task, config.seed);
    } catch (const TaskDataError& e) {
      fail(task.pointer(e.field().c_str()), e.message());
    }
  }

  const Section model = root.section("model");
  ModelConfig& m = config.model;
  // model.attn_window: one number is the list of that one value.
  const json* window =
      document.contains("model") && document["model"].is_object() && document["model"].contains("attn_window")
          ? &document["model"]["attn_window"]
          : nullptr;
  if (window && window->is_number()) {
    json one = document;
    one["model"]["attn_window"] = json::array({*window});
    return validate(one, for_this_machine);
  }
  model.read_fields(model_fields(), m, {kLayerNormKey});
  if (!m.init_from.empty()) {  // like task.path: from the current folder, stored absolute
    std::error_code ec;
    m.init_from = std::filesystem::absolute(m.init_from, ec).lexically_normal().string();
  }
  if (model.has(kLayerNormKey)) {  // the older spelling of model.norm: true is "layer", false "none"
    bool layer_norm = true;
    model.read(kLayerNormKey, layer_norm);
    const nn::NormKind said = layer_norm ? nn::NormKind::layer : nn::NormKind::none;
    if (model.has("norm") && m.norm != said)
      fail(model.pointer(kLayerNormKey),
           std::string(layer_norm ? "true" : "false") + " contradicts model.norm (give one of the two)");
    m.norm = said;
  }
  if (m.d_model % m.n_heads != 0) {
    fail(model.pointer("n_heads"),
         std::to_string(m.n_heads) + " does not divide d_model " + std::to_string(m.d_model));
  }
  if (m.n_heads % nn::kv_heads(m) != 0) {  // 0 = n_heads
    fail(model.pointer("n_kv_heads"),
         std::to_string(m.n_kv_heads) + " does not divide n_heads " + std::to_string(m.n_heads));
  }
  if (m.attn_window.size() > 1 && static_cast<int64_t>(m.attn_window.size()) != m.n_layers) {
    fail(model.pointer("attn_window"), std::to_string(m.attn_window.size()) + " values for n_layers " +
                                           std::to_string(m.n_layers) +
                                           " (give one value for every layer, or one per layer)");
  }
  if (m.positions == nn::PositionKind::rotary) {
    const int64_t dims = nn::rotary_dims(m);
    if (dims < 2 || dims % 2 != 0)
      fail(model.pointer("rotary_fraction"), nlohmann::json(m.rotary_fraction).dump() + " of the head's " +
                                                 std::to_string(m.d_model / m.n_heads) + " dims is " +
                                                 std::to_string(dims) +
                                                 " rotary dims; they must be even and >= 2");
  }
  if (!resolved_task && m.vocab == 0)
    fail(model.pointer("vocab"),
         "0 (follow the task) needs the task's tokenizer, which is read from the run "
         "folder: give the model's vocabulary");
  const int seq_len = resolved_task ? resolved_task->seq_len() : config.task.length;
  const int task_vocab = resolved_task ? resolved_task->vocab_size() : static_cast<int>(m.vocab);
  if (m.max_len == 0) m.max_len = seq_len;
  if (m.max_len < seq_len) {
    const std::string note = resolved_task ? resolved_task->longest_sequence_note() : "";
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
  if (r.batch_size == 0 && !(resolved_task && resolved_task->finite())) {
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

// The pointer of every field and section a --set may name: "/train", "/train/steps", ...
std::set<std::string> settable_pointers() {
  std::set<std::string> pointers = {child("/model", kLayerNormKey)};
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
  std::optional<json> as_json;
  try {
    // A long value is named by its first bytes: the error stays a short line.
    as_json = io::parse_json_text_if_json(value, label.size() > 60 ? label.substr(0, 57) + "..." : label);
  } catch (const io::JsonError& error) {
    throw ConfigError(error.what());
  }
  parsed.value = as_json ? std::move(*as_json) : json(value);  // not JSON: a plain string such as runs/x
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
  } catch (const io::FieldProblem& problem) {
    throw config_error(source + ": " + shown(problem.pointer) + ": " + problem.message);
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  json document;
  try {
    document = io::parse_json_text(io::read_json_file_text(path), path);
  } catch (const io::JsonError& error) {
    throw ConfigError(error.what());
  }
  if (!document.is_object()) throw config_error(path + ": /: expected an object, got " + describe(document));
  return from_json(document, path, overrides);
}

json parse_json_text(const std::string& text, const std::string& path) {
  try {
    return io::parse_json_text(text, path);
  } catch (const io::JsonError& error) {
    throw ConfigError(error.what());  // already one printable line
  }
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
  } catch (const io::FieldProblem& problem) {
    // The last override that wrote this field (or a section holding it) is where the bad value came from.
    for (auto it = parsed.rbegin(); it != parsed.rend(); ++it) {
      if (is_within(problem.pointer, it->pointer)) {
        throw config_error("--set " + it->text + ": " + shown(problem.pointer) + ": " + problem.message);
      }
    }
    throw config_error(source + ": " + shown(problem.pointer) + ": " + problem.message);
  }
}

}  // namespace train
