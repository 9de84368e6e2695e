#include <boost/test/unit_test.hpp>

// Config loading: every bad-config case gives its exact one-line message, --set overrides go through the
// same validation, every committed config loads, and the resolved config round-trips.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "train/config.h"

namespace train {
// For Boost.Test's messages when two configs differ.
std::ostream& operator<<(std::ostream& out, const Config& config) {
  return out << to_json(config).dump();
}
}  // namespace train

namespace fs = std::filesystem;
using train::Config;
using train::ConfigError;
using train::load_config;

namespace {

// Writes `text` to a fresh file in the temp directory and returns its path.
std::string write_config(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "attograd_test_config";
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// The ConfigError message of loading, or "" when it loads.
std::string error_of(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_config(path, overrides);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

// The message of a config made of `text`, with `<file>` standing for its path.
std::string error_of_text(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const std::string path = write_config("case.json", text);
  std::string message = error_of(path, overrides);
  const size_t at = message.find(path);
  if (at != std::string::npos) message.replace(at, path.size(), "<file>");
  return message;
}

const std::string kSource = ATTOGRAD_SOURCE_DIR;

}  // namespace

BOOST_AUTO_TEST_CASE(empty_object_gives_design_defaults) {
  const Config config = load_config(write_config("empty.json", "{}"));
  BOOST_TEST(config.name == "reverse");
  BOOST_TEST(config.seed == 42u);
  BOOST_TEST(config.task.kind == "reverse");
  BOOST_TEST(config.task.vocab == 10);
  BOOST_TEST(config.task.length == 8);
  BOOST_TEST(config.model.d_model == 64);
  BOOST_TEST(config.model.n_heads == 4);
  BOOST_TEST(config.model.n_layers == 2);
  BOOST_TEST(config.model.d_ff == 256);
  BOOST_TEST(!config.model.attention_only);
  BOOST_TEST(config.model.max_len == 17);  // BOS + 8 + SEP + 8 answers, minus the last token
  BOOST_TEST(config.model.vocab == 12);    // 10 values + BOS + SEP
  BOOST_TEST(config.train.steps == 3000);
  BOOST_TEST(config.train.batch_size == 64);
  BOOST_TEST(config.train.lr == 0.001);
  BOOST_TEST(config.train.warmup == 100);
  BOOST_TEST(config.train.schedule == "cosine");
  BOOST_TEST(config.train.weight_decay == 0.01);
  BOOST_TEST(config.train.grad_clip == 1.0);
  BOOST_TEST(config.train.threads == 2);
  BOOST_TEST(config.train.eval_every == 250);
  BOOST_TEST(config.train.log_every == 50);
  BOOST_TEST(config.train.eval_size == 512);
  BOOST_TEST(config.train.memory_limit_gb == 0.0);  // 0 = this machine's memory
  BOOST_TEST(config.train.shards == 2);             // 0 resolved: a small model and 64 rows
  BOOST_TEST(config.output.dir == "runs/reverse");
  BOOST_TEST(config.output.attention_every == 500);
  BOOST_TEST(config.output.probes == 4);
  BOOST_TEST(config.output.checkpoint_every == 1000);
}

BOOST_AUTO_TEST_CASE(output_dir_follows_the_name_unless_given) {
  BOOST_TEST(load_config(write_config("named.json", R"({"name": "mine"})")).output.dir == "runs/mine");
  BOOST_TEST(
      load_config(write_config("dir.json", R"({"name": "mine", "output": {"dir": "x/y"}})")).output.dir ==
      "x/y");
}

BOOST_AUTO_TEST_CASE(model_max_len_and_vocab_follow_the_task_unless_given) {
  const Config config =
      load_config(write_config("sizes.json", R"({"task": {"kind": "copy", "vocab": 5, "length": 4},
                                     "model": {"max_len": 32, "vocab": 20}})"));
  BOOST_TEST(config.model.max_len == 32);
  BOOST_TEST(config.model.vocab == 20);
  const Config random = load_config(write_config("random.json", R"({"task": {"kind": "random", "vocab": 16,
                                                                             "length": 32}})"));
  BOOST_TEST(random.model.max_len == 32);
  BOOST_TEST(random.model.vocab == 16);
}

BOOST_AUTO_TEST_CASE(unknown_keys_are_errors_at_every_level) {
  BOOST_TEST(error_of_text(R"({"nme": "x"})") == "<file>: /nme: unknown key");
  BOOST_TEST(error_of_text(R"({"train": {"stepz": 5}})") == "<file>: /train/stepz: unknown key");
  BOOST_TEST(error_of_text(R"({"task": {"modulus": 7}})") == "<file>: /task/modulus: unknown key");
  BOOST_TEST(error_of_text(R"({"output": {"a/b": 1}})") == "<file>: /output/a~1b: unknown key");
}

BOOST_AUTO_TEST_CASE(wrong_types_name_what_was_expected) {
  BOOST_TEST(error_of_text(R"({"train": {"steps": "100"}})") ==
             "<file>: /train/steps: expected an integer, got string \"100\"");
  BOOST_TEST(error_of_text(R"({"train": {"steps": 2.5}})") ==
             "<file>: /train/steps: expected an integer, got 2.5");
  BOOST_TEST(error_of_text(R"({"train": {"lr": "fast"}})") ==
             "<file>: /train/lr: expected a number, got string \"fast\"");
  BOOST_TEST(error_of_text(R"({"model": {"attention_only": 1}})") ==
             "<file>: /model/attention_only: expected true or false, got 1");
  BOOST_TEST(error_of_text(R"({"name": null})") == "<file>: /name: expected a string, got null");
  BOOST_TEST(error_of_text(R"({"seed": -1})") == "<file>: /seed: expected a non-negative integer, got -1");
  BOOST_TEST(error_of_text(R"({"model": [1, 2]})") == "<file>: /model: expected an object, got an array");
  BOOST_TEST(error_of_text(R"([1, 2])") == "<file>: /: expected an object, got an array");
  BOOST_TEST(error_of_text(R"({"train": {"steps": 3000000000}})") ==
             "<file>: /train/steps: integer out of range, got 3000000000");
}

BOOST_AUTO_TEST_CASE(out_of_range_values) {
  BOOST_TEST(error_of_text(R"({"model": {"n_heads": 3}})") ==
             "<file>: /model/n_heads: 3 does not divide d_model 64");
  BOOST_TEST(error_of_text(R"({"model": {"d_model": 0}})") == "<file>: /model/d_model: must be >= 1, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"lr": 0}})") == "<file>: /train/lr: must be > 0, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"lr": -0.5}})") == "<file>: /train/lr: must be > 0, got -0.5");
  BOOST_TEST(error_of_text(R"({"train": {"steps": 0}})") == "<file>: /train/steps: must be >= 1, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"batch_size": 0}})") ==
             "<file>: /train/batch_size: 0 (the whole training set) needs a finite dataset: "
             "task.train_fraction, or a "
             "sequences file");
  BOOST_TEST(error_of_text(R"({"train": {"threads": 0}})") == "<file>: /train/threads: must be >= 1, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"warmup": -1}})") == "<file>: /train/warmup: must be >= 0, got -1");
  BOOST_TEST(error_of_text(R"({"train": {"grad_clip": -1}})") ==
             "<file>: /train/grad_clip: must be >= 0, got -1");
  BOOST_TEST(error_of_text(R"({"train": {"eval_every": 0}})") ==
             "<file>: /train/eval_every: must be >= 1, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"log_every": 0}})") ==
             "<file>: /train/log_every: must be >= 1, got 0");
  BOOST_TEST(error_of_text(R"({"train": {"schedule": "linear"}})") ==
             "<file>: /train/schedule: expected \"cosine\" or \"constant\", got \"linear\"");
  // The list of kinds that follows is the registry's (tests/train/test_tasks.cpp).
  BOOST_TEST(error_of_text(R"({"task": {"kind": "add"}})")
                 .rfind("<file>: /task/kind: unknown task \"add\"; expected one of ", 0) == 0u);
  BOOST_TEST(error_of_text(R"({"name": ""})") == "<file>: /name: must not be empty");
  BOOST_TEST(error_of_text(R"({"train": {"shards": -1}})") == "<file>: /train/shards: must be >= 0, got -1");
  BOOST_TEST(
      error_of_text(R"({"train": {"batch_size": 4, "shards": 5}})") ==
      "<file>: /train/shards: must be <= the rows of a step (4), got 5 (0 = the default for the model's "
      "size)");
}

BOOST_AUTO_TEST_CASE(shards_default_by_model_size_and_batch) {
  // 0 (or absent) resolves by the model's size and the batch; a given count is kept.
  BOOST_TEST(load_config(kSource + "/bench/configs/tiny.json").train.shards == 2);
  BOOST_TEST(load_config(kSource + "/bench/configs/small.json").train.shards == 2);
  BOOST_TEST(load_config(kSource + "/bench/configs/medium.json").train.shards == 1);  // 12.9M parameters
  BOOST_TEST(load_config(write_config("one_row.json", R"({"train": {"batch_size": 1}})")).train.shards == 1);
  BOOST_TEST(
      load_config(write_config("three.json", R"({"train": {"batch_size": 5, "shards": 3}})")).train.shards ==
      3);
  BOOST_TEST(load_config(kSource + "/bench/configs/medium.json", {"train.shards=4"}).train.shards == 4);
  // Each shard after the first holds a copy of the weights and their gradients: 8 bytes a parameter.
  const Config one = load_config(kSource + "/bench/configs/small.json", {"train.shards=1"});
  const Config three = load_config(kSource + "/bench/configs/small.json", {"train.shards=3"});
  BOOST_TEST(train::estimate_memory_bytes(three, 64) - train::estimate_memory_bytes(one, 64) ==
             16 * train::parameter_count(one.model));
}

BOOST_AUTO_TEST_CASE(sequence_longer_than_max_len) {
  BOOST_TEST(
      error_of_text(R"({"model": {"max_len": 16}})") ==
      "<file>: /model/max_len: 16 is shorter than the task's sequence length 17 (0 = follow the task)");
}

BOOST_AUTO_TEST_CASE(vocabulary_too_small_for_the_task) {
  BOOST_TEST(error_of_text(R"({"model": {"vocab": 11}})") ==
             "<file>: /model/vocab: 11 is smaller than the task's vocabulary 12 (0 = follow the task)");
  BOOST_TEST(error_of_text(R"({"task": {"kind": "induction", "vocab": 6, "length": 8}})") ==
             "<file>: /task/vocab: induction draws up to 12 distinct values (fillers and the repeated block) "
             "for length 8, "
             "so vocab must be at least that, got 6");
  BOOST_TEST(
      error_of_text(R"({"task": {"kind": "counting", "vocab": 8, "length": 8}})") ==
      "<file>: /task/vocab: counting writes counts up to length 8 as value tokens, so vocab must be > 8, "
      "got 8");
  BOOST_TEST(error_of_text(R"({"task": {"vocab": 1}})") == "<file>: /task/vocab: must be >= 2, got 1");
  BOOST_TEST(
      error_of_text(R"({"task": {"kind": "modadd", "vocab": 5, "length": 2}})") ==
      "<file>: /task/length: modadd with vocab 5 and length 2 has fewer than 50 distinct sequences, too "
      "few to hold some out for evaluation");
}

BOOST_AUTO_TEST_CASE(malformed_json_reports_line_and_column) {
  // The stray comma sits on line 3; the parser notices at the "}" that follows it, line 4 column 1.
  const std::string message = error_of_text("{\n  \"name\": \"x\",\n  \"seed\": 1,\n}\n");
  BOOST_TEST(message.rfind("<file>: line 4, column 1: malformed JSON (", 0) == 0, message);
  const std::string truncated = error_of_text("{\"task\": {\"kind\": \"copy\"");
  BOOST_TEST(truncated.rfind("<file>: line 1, column 25: malformed JSON (", 0) == 0, truncated);
  const std::string bad_value = error_of_text("{\n\"seed\": tru\n}");
  BOOST_TEST(bad_value.rfind("<file>: line 2, column ", 0) == 0, bad_value);
  BOOST_TEST(message.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_errors) {
  BOOST_TEST(error_of_text(R"({"train": {"steps": 1, "steps": 2}})") ==
             "<file>: /train/steps: duplicate key");
}

BOOST_AUTO_TEST_CASE(missing_file_says_so) {
  const std::string path = (fs::temp_directory_path() / "attograd_no_such_config.json").string();
  BOOST_TEST(error_of(path) == path + ": cannot open (No such file or directory)");
}

BOOST_AUTO_TEST_CASE(set_overrides_apply) {
  const std::string path = kSource + "/configs/reverse.json";
  const Config config = load_config(path, {"train.steps=100", "task.kind=copy", "model.attention_only=true",
                                           "train.lr=3e-4", "name=\"quoted\"", "output.dir=runs/x y"});
  BOOST_TEST(config.train.steps == 100);
  BOOST_TEST(config.task.kind == "copy");
  BOOST_TEST(config.model.attention_only);
  BOOST_TEST(config.train.lr == 3e-4);
  BOOST_TEST(config.name == "quoted");
  BOOST_TEST(config.output.dir == "runs/x y");
  // A later override wins, and a whole section can be set as JSON.
  BOOST_TEST(load_config(path, {"train.steps=5", "train.steps=6"}).train.steps == 6);
  const Config task = load_config(path, {R"(task={"kind": "sort", "vocab": 4, "length": 5})"});
  BOOST_TEST(task.task.kind == "sort");
  BOOST_TEST(task.task.vocab == 4);
  BOOST_TEST(task.model.max_len == 11);
  // A section the file lacks is created.
  BOOST_TEST(load_config(write_config("empty.json", "{}"), {"output.probes=0"}).output.probes == 0);
}

// model.norm's older spelling, layer_norm, still reads (from a file and with --set), is never written, and
// may not contradict model.norm.
BOOST_AUTO_TEST_CASE(layer_norm_is_the_older_spelling_of_norm) {
  const std::string none = write_config("layer_norm.json", R"({"model": {"layer_norm": false}})");
  BOOST_TEST((load_config(none).model.norm == nn::NormKind::none));
  BOOST_TEST((load_config(write_config("ln_true.json", R"({"model": {"layer_norm": true}})")).model.norm ==
              nn::NormKind::layer));
  BOOST_TEST((load_config(write_config("empty.json", "{}"), {"model.layer_norm=false"}).model.norm ==
              nn::NormKind::none));
  BOOST_TEST((load_config(write_config("norm.json", R"({"model": {"norm": "none", "layer_norm": false}})"))
                  .model.norm == nn::NormKind::none));
  const nlohmann::json written = train::to_json(load_config(none));
  BOOST_TEST(written["model"]["norm"] == "none");
  BOOST_TEST(!written["model"].contains("layer_norm"));
  BOOST_TEST(error_of_text(R"({"model": {"norm": "none", "layer_norm": true}})") ==
             "<file>: /model/layer_norm: true contradicts model.norm (give one of the two)");
  BOOST_TEST(error_of_text(R"({"model": {"layer_norm": "yes"}})") ==
             "<file>: /model/layer_norm: expected true or false, got string \"yes\"");
  BOOST_TEST(error_of_text(R"({"model": {"norm": "batch"}})") ==
             "<file>: /model/norm: expected \"layer\", \"rms\" or \"none\", got \"batch\"");
  // RMSNorm and its eps (model.norm_eps, every norm's; LayerNorm's default 1e-5 stays).
  const train::Config rms =
      load_config(write_config("rms.json", "{}"), {"model.norm=rms", "model.norm_eps=1e-6"});
  BOOST_TEST((rms.model.norm == nn::NormKind::rms));
  BOOST_TEST(rms.model.norm_eps == 1e-6);
  BOOST_TEST(train::to_json(rms)["model"]["norm"] == "rms");
  BOOST_TEST(load_config(none).model.norm_eps == 1e-5);
  BOOST_TEST(error_of_text(R"({"model": {"norm": "rms", "layer_norm": true}})") ==
             "<file>: /model/layer_norm: true contradicts model.norm (give one of the two)");
  BOOST_TEST(error_of_text(R"({"model": {"norm_eps": 0}})") == "<file>: /model/norm_eps: must be > 0, got 0");
}

BOOST_AUTO_TEST_CASE(set_errors_name_the_override) {
  const std::string path = kSource + "/configs/reverse.json";
  BOOST_TEST(error_of(path, {"train.stepz=5"}) == "--set train.stepz=5: /train/stepz: unknown key");
  BOOST_TEST(error_of(path, {"train.steps.x=5"}) == "--set train.steps.x=5: /train/steps/x: unknown key");
  BOOST_TEST(error_of(path, {"train.steps=abc"}) ==
             "--set train.steps=abc: /train/steps: expected an integer, got string \"abc\"");
  BOOST_TEST(error_of(path, {"train.lr=0"}) == "--set train.lr=0: /train/lr: must be > 0, got 0");
  BOOST_TEST(error_of(path, {"model.n_heads=5"}) ==
             "--set model.n_heads=5: /model/n_heads: 5 does not divide d_model 64");
  BOOST_TEST(error_of(path, {R"(task={"kind": "copy", "lenght": 3})"}) ==
             R"(--set task={"kind": "copy", "lenght": 3}: /task/lenght: unknown key)");
  BOOST_TEST(error_of(path, {"train.steps"}) ==
             "--set train.steps: expected key.path=value, e.g. train.steps=100");
  BOOST_TEST(error_of(path, {"=5"}) == "--set =5: expected key.path=value, e.g. train.steps=100");
  // A bad value that the file wrote is still the file's, even when an override touched another field.
  const std::string bad = write_config("bad_heads.json", R"({"model": {"n_heads": 3}})");
  BOOST_TEST(error_of(bad, {"train.steps=10"}) == bad + ": /model/n_heads: 3 does not divide d_model 64");
}

// Grouped-query and local attention: n_kv_heads divides n_heads (0 = n_heads); attn_window is one number
// (every layer's) or one per layer.
BOOST_AUTO_TEST_CASE(kv_heads_and_windows_are_checked) {
  const std::string path = kSource + "/configs/reverse.json";  // 2 heads, 1 layer
  BOOST_TEST(error_of(path, {"model.n_kv_heads=3"}) ==
             "--set model.n_kv_heads=3: /model/n_kv_heads: 3 does not divide n_heads 2");
  BOOST_TEST(error_of(path, {"model.n_kv_heads=-1"}) ==
             "--set model.n_kv_heads=-1: /model/n_kv_heads: must be >= 0, got -1");
  BOOST_TEST(error_of(path, {"model.attn_window=[4,4]"}) ==
             "--set model.attn_window=[4,4]: /model/attn_window: 2 values for n_layers 1 (give one value for "
             "every layer, or one per layer)");
  BOOST_TEST(error_of(path, {"model.attn_window=-2"}) ==
             "--set model.attn_window=-2: /model/attn_window/0: must be >= 0, got -2");
  const Config c = load_config(path, {"model.n_kv_heads=1", "model.attn_window=5", "model.n_layers=2"});
  BOOST_TEST(nn::kv_heads(c.model) == 1);
  BOOST_TEST((c.model.attn_window == std::vector<int64_t>{5}));
  BOOST_TEST(nn::attn_window(c.model, 1) == 5);
  const Config plain = load_config(path);
  BOOST_TEST(nn::kv_heads(plain.model) == 2);
  BOOST_TEST(nn::attn_window(plain.model, 0) == 0);
}

BOOST_AUTO_TEST_CASE(every_committed_config_loads) {
  int loaded = 0;
  for (const char* folder : {"/configs", "/bench/configs"}) {
    for (const auto& entry : fs::directory_iterator(kSource + folder)) {
      if (entry.path().extension() != ".json") continue;
      BOOST_TEST_CONTEXT(entry.path().string()) {
        BOOST_CHECK_NO_THROW(load_config(entry.path().string()));
        ++loaded;
      }
    }
  }
  BOOST_TEST(loaded >= 9);
  // The default config is the documented example, tuned (docs/configs.md says why): one layer of two heads,
  // so the reversing head is the last layer's, and a higher learning rate that sharpens it.
  Config tuned = load_config(write_config("empty.json", "{}"));
  tuned.model.n_layers = 1;
  tuned.model.n_heads = 2;
  tuned.train.lr = 0.003;
  tuned.train.steps = 2000;
  tuned.output.attention_every = 100;
  BOOST_TEST((load_config(kSource + "/configs/reverse.json") == tuned));
}

BOOST_AUTO_TEST_CASE(bench_configs_have_issue_6_sizes) {
  const Config tiny = load_config(kSource + "/bench/configs/tiny.json");
  BOOST_TEST(tiny.task.kind == "random");
  BOOST_TEST(tiny.model.vocab == 16);
  BOOST_TEST(tiny.model.max_len == 32);
  BOOST_TEST(tiny.train.batch_size == 32);
  const Config small = load_config(kSource + "/bench/configs/small.json");
  BOOST_TEST(small.model.vocab == 64);
  BOOST_TEST(small.model.d_model == 128);
  BOOST_TEST(small.model.n_layers == 4);
  BOOST_TEST(small.model.max_len == 64);
  const Config medium = load_config(kSource + "/bench/configs/medium.json");
  BOOST_TEST(medium.model.vocab == 256);
  BOOST_TEST(medium.model.d_model == 512);
  BOOST_TEST(medium.model.n_heads == 8);
  BOOST_TEST(medium.model.d_ff == 2048);
  BOOST_TEST(medium.model.max_len == 128);
  BOOST_TEST(medium.train.batch_size == 16);
}

BOOST_AUTO_TEST_CASE(resolved_config_round_trips) {
  for (const char* name : {"reverse", "copy", "sort", "induction", "modadd", "counting"}) {
    BOOST_TEST_CONTEXT(name) {
      const Config config = load_config(kSource + "/configs/" + name + ".json", {"train.lr=0.0003"});
      const nlohmann::json resolved = train::to_json(config);
      // Every field is written, the resolved sizes included.
      BOOST_TEST(resolved["model"]["max_len"].get<int>() == config.model.max_len);
      BOOST_TEST(resolved["model"]["vocab"].get<int>() == config.model.vocab);
      for (const train::FieldInfo& field : train::config_fields()) {
        std::string pointer = "/" + field.path;
        std::replace(pointer.begin(), pointer.end(), '.', '/');
        BOOST_TEST(resolved.contains(nlohmann::json::json_pointer(pointer)), pointer);
      }
      BOOST_TEST(train::from_json(resolved) == config);
      // Through text, as RUN/config.json is written and read back.
      const std::string path = write_config("resolved.json", resolved.dump(2));
      BOOST_TEST(load_config(path) == config);
    }
  }
}

BOOST_AUTO_TEST_CASE(from_json_names_its_source) {
  nlohmann::json document = {{"train", {{"threads", 0}}}};
  try {
    train::from_json(document, "model.safetensors");
    BOOST_FAIL("expected a ConfigError");
  } catch (const ConfigError& error) {
    BOOST_TEST(std::string(error.what()) == "model.safetensors: /train/threads: must be >= 1, got 0");
  }
  // Integers built in code are signed; a seed written that way is still accepted.
  BOOST_TEST(train::from_json({{"seed", 7}}).seed == 7u);
}

namespace {

// A field's row of docs/configs.md's field table: | field | type | default | valid | meaning | resume |.
std::string doc_row(const train::FieldInfo& field) {
  std::string default_text = "`" + field.default_value + "`";
  if (!field.default_means.empty()) default_text += " = " + field.default_means;
  return "| `" + field.path + "` | " + field.type + " | " + default_text + " | " + field.valid + " | " +
         field.meaning + " | " + (field.resume_settable ? "yes" : "no") + " |";
}

}  // namespace

// docs/configs.md's field table is the code's tables (train/config.cpp) row for row: the same fields in the
// same order, each with the type, default, valid values, meaning and resume column the code declares.

BOOST_AUTO_TEST_CASE(docs_field_table_is_the_code_table) {
  std::ifstream doc(kSource + "/docs/configs.md");
  BOOST_TEST_REQUIRE(doc.good());
  // The rows of the first table after "## Fields", by field.
  std::vector<std::string> doc_paths;
  std::map<std::string, std::string> doc_rows;
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Fields";
    if (!in_section) continue;
    if (line.rfind("|", 0) == 0) {
      in_table = true;
      if (line.rfind("| `", 0) != 0) continue;  // the header and its rule
      const std::string path = line.substr(3, line.find('`', 3) - 3);
      doc_paths.push_back(path);
      doc_rows[path] = line;
    } else if (in_table) {
      break;
    }
  }
  std::vector<std::string> code_paths;
  std::string expected_table;
  bool same = true;
  for (const train::FieldInfo& field : train::config_fields()) {
    code_paths.push_back(field.path);
    expected_table += doc_row(field) + "\n";
    BOOST_TEST_CONTEXT(field.path) {
      BOOST_TEST(doc_rows.count(field.path) == 1u, "missing from docs/configs.md's field table");
      const auto row = doc_rows.find(field.path);
      if (row != doc_rows.end()) BOOST_TEST(row->second == doc_row(field));
      same = same && row != doc_rows.end() && row->second == doc_row(field);
    }
  }
  for (const std::string& path : doc_paths) {
    BOOST_TEST_CONTEXT(path) {
      BOOST_TEST(std::count(code_paths.begin(), code_paths.end(), path) == 1, "not a field of the code");
    }
  }
  BOOST_TEST(doc_paths == code_paths, "docs/configs.md's rows are not in the code's order");
  if (!same || doc_paths != code_paths)
    BOOST_ERROR("docs/configs.md's field table rows should be:\n" + expected_table);
}

BOOST_AUTO_TEST_CASE(resume_settable_fields_follow_the_tables) {
  std::vector<std::string> marked;
  for (const train::FieldInfo& field : train::config_fields())
    if (field.resume_settable) marked.push_back(field.path);
  BOOST_TEST(train::resume_settable_fields() == marked);
  // The fields that change neither the model, the data nor the meaning of what was logged may change; the
  // others may not.
  for (const char* path : {"train.steps", "train.threads", "train.memory_limit_gb", "train.eval_every",
                           "train.log_every", "output.attention_every", "output.checkpoint_every"}) {
    BOOST_TEST(std::count(marked.begin(), marked.end(), path) == 1, path);
  }
  for (const char* path : {"seed", "task.kind", "model.d_model", "train.lr", "train.batch_size",
                           "train.shards", "train.eval_size", "output.probes"}) {
    BOOST_TEST(std::count(marked.begin(), marked.end(), path) == 0, path);
  }
  BOOST_CHECK_NO_THROW(train::check_resume_overrides({"train.steps=10", "output.checkpoint_every=0"}));
  BOOST_CHECK_THROW(train::check_resume_overrides({"train.lr=0.1"}), ConfigError);
}
