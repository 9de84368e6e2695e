// Limits on outside input, each a regression test for a way a hostile or careless input used to hang,
// exhaust memory or break the one-line error rule: train.threads and the memory estimate, config files
// that are not small JSON, bytes that are not printable text, --resume overrides, --ids syntax, the
// checkpoint's tensor table and header size, and the optimiser file's metadata.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/temp_dir.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/model_factory.h"
#include "train/run_folder.h"
#include "train/safetensors.h"
#include "train/token_input.h"

namespace fs = std::filesystem;
using train::Config;
using train::ConfigError;

namespace {

std::string write_file(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name), std::ios::binary) << text;
  return dir.file(name);
}

// The message of what `f` throws (any std::exception), or "" when it does not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string config_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  testing::TempDir dir;
  const std::string path = write_file(dir, "c.json", text);
  std::string message = error_of([&] { train::load_config(path, overrides); });
  const size_t at = message.find(path);
  if (at != std::string::npos) message.replace(at, path.size(), "<file>");
  return message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool one_printable_line(const std::string& text) {
  return !text.empty() && io::is_printable_utf8(text) && text.find('\t') == std::string::npos;
}

// A small model's config, its run folder with one checkpoint written by the real writer.
Config small_config() {
  Config c;
  c.task.length = 3;
  c.model.d_model = 8;
  c.model.n_heads = 2;
  c.model.n_layers = 1;
  c.model.d_ff = 16;
  return train::from_json(train::to_json(c));
}

void write_checkpoint(const std::string& run, const Config& config, int64_t step) {
  auto model = train::make_model<float>(config);
  std::vector<train::OptimParam> params;
  for (auto& p : model->named_parameters())
    params.push_back({p.name, p.tensor, train::uses_weight_decay(p.kind)});
  train::AdamW optimizer(params, config.train.weight_decay);
  optimizer.set_steps_taken(step);
  train::save_checkpoint(run, config, *model, optimizer, ag::Rng(7), step);
}

// Rewrites one metadata value of a safetensors file, keeping its tensors.
void set_metadata(const std::string& path, const std::string& key, const std::string& value) {
  train::SafetensorsFile f = train::read_safetensors(path);
  f.metadata[key] = value;
  train::write_safetensors(path, f.tensors, f.metadata);
}

std::string optimizer_error(const std::string& run, const Config& config, int64_t step) {
  auto model = train::make_model<float>(config);
  std::vector<train::OptimParam> params;
  for (auto& p : model->named_parameters())
    params.push_back({p.name, p.tensor, train::uses_weight_decay(p.kind)});
  train::AdamW optimizer(params, config.train.weight_decay);
  ag::Rng rng(1);
  return error_of([&] {
    train::load_optimizer_checkpoint(io::layout::optimizer_checkpoint(run, step), optimizer, rng, step);
  });
}

}  // namespace

BOOST_AUTO_TEST_CASE(train_threads_is_capped_at_four_times_the_cores) {
  const int cap = train::max_threads();
  BOOST_TEST(cap >= 4);
  BOOST_TEST(config_error(R"({"train": {"threads": )" + std::to_string(cap) + "}}") == "");
  BOOST_TEST(config_error(R"({"train": {"threads": )" + std::to_string(cap + 1) + "}}") ==
             "<file>: /train/threads: must be <= " + std::to_string(cap) + " (4 x this machine's " +
                 std::to_string(cap / 4) + " cores), got " + std::to_string(cap + 1));
  BOOST_TEST(contains(config_error("{}", {"train.threads=600"}), "--set train.threads=600: /train/threads"));
  // A checkpoint's config may come from a larger machine: reading it (for eval) does not apply the cap.
  nlohmann::json document = train::to_json(Config{});
  document["train"]["threads"] = cap + 1;
  BOOST_TEST(train::from_json(document, "model.safetensors").train.threads == cap + 1);
}

BOOST_AUTO_TEST_CASE(parameter_count_matches_the_built_model) {
  for (bool attention_only : {false, true}) {
    for (int layers : {1, 3}) {
      Config c = small_config();
      c.model.attention_only = attention_only;
      c.model.n_layers = layers;
      c.model.vocab = 23;
      c.model.max_len = 11;
      BOOST_TEST(train::parameter_count(c.model) ==
                 static_cast<double>(train::make_model<float>(c)->parameter_count()));
    }
  }
  // The options that change the count: a gated MLP's gate, tied embeddings' one matrix.
  Config c = small_config();
  c.model.vocab = 23, c.model.max_len = 11;
  c.model.activation = nn::Activation::swiglu, c.model.tie_embeddings = true;
  BOOST_TEST(train::parameter_count(c.model) ==
             static_cast<double>(train::make_model<float>(c)->parameter_count()));
}

BOOST_AUTO_TEST_CASE(sizes_beyond_memory_name_the_field_and_the_estimate) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {"vocab": 1000000000}})", "/model/vocab: 1000000000 makes the run need about"},
      {R"({"model": {"d_model": 40000, "n_heads": 1}})", "/model/d_model: 40000 makes"},
      {R"({"model": {"max_len": 1000000000}})", "/model/max_len: 1000000000 makes"},
      {R"({"model": {"d_ff": 1000000000}})", "/model/d_ff: 1000000000 makes"},
      {R"({"model": {"n_layers": 100000000}})", "/model/n_layers: 100000000 makes"},
      {R"({"train": {"eval_size": 2000000000}})", "/train/eval_size: 2000000000 makes"},
      {R"({"train": {"batch_size": 2000000000}})", "/train/batch_size: 2000000000 makes"},
      // Each shard after the first holds a copy of the weights and its own gradients.
      {R"({"train": {"batch_size": 1000000, "shards": 1000000}})", "/train/shards: 1000000 makes"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string message = config_error(text);
    BOOST_TEST(contains(message, expected), text << " -> " << message);
    BOOST_TEST(contains(message, " GB of memory (an estimate), over the limit of "), message);
    BOOST_TEST(contains(message, "--set train.memory_limit_gb=N"), message);
  }
  // The limit is a field: lowered, it refuses the defaults (about 30 MB); raised, it lets a large run by.
  const std::string low = config_error("{}", {"train.memory_limit_gb=0.001"});
  BOOST_TEST(contains(low, "--set train.memory_limit_gb=0.001: /train/memory_limit_gb: the run needs about"),
             low);
  BOOST_TEST(contains(low, "over the limit of 0.0 GB (train.memory_limit_gb)"), low);
  BOOST_TEST(config_error(R"({"train": {"eval_size": 2000000000, "memory_limit_gb": 1e6}})") == "");
  BOOST_TEST(
      contains(config_error("{}", {"train.memory_limit_gb=-1"}), "/train/memory_limit_gb: must be >= 0"));
  // The estimate grows with what a run holds, and the defaults are small.
  Config c;
  const double base = train::estimate_memory_bytes(c, 17);
  BOOST_TEST(base > 1e6);
  BOOST_TEST(base < 1e9);
  c.train.batch_size *= 2;
  BOOST_TEST(train::estimate_memory_bytes(c, 17) > base);
}

BOOST_AUTO_TEST_CASE(numbers_out_of_double_range_give_one_line_naming_the_file) {
  BOOST_TEST(config_error("{\"train\":\n {\"lr\": 1e400}}") ==
             "<file>: line 2, column 9: number 1e400 is out of range");
  // A --set value goes through the same bounded reader (io/json_read.h): JSON it refuses is an error, not a
  // string.
  BOOST_TEST(config_error("{}", {"train.lr=1e400"}) ==
             "--set train.lr=1e400: line 1, column 1: number 1e400 is out of range");
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_printable_text_are_refused_and_escaped) {
  // Not UTF-8, from --set (a JSON file cannot hold such bytes): refused at validation, before any folder.
  const std::string bad_name = config_error("{}", {"name=run\xff"});
  BOOST_TEST(contains(bad_name, "--set name=run\\xff: /name: expected UTF-8 text without control characters"),
             bad_name);
  BOOST_TEST(one_printable_line(bad_name), bad_name);
  const std::string bad_dir = config_error("{}", {"output.dir=runs/\xc3("});
  BOOST_TEST(contains(bad_dir, "/output/dir: expected UTF-8 text"), bad_dir);
  // Control bytes: a newline in a JSON key, CR/LF or ESC inside --set.
  const std::string key = config_error(R"({"train": {"st\neps": 1}})");
  BOOST_TEST(key == "<file>: /train/st\\x0aeps: unknown key");
  const std::string crlf = config_error("{}", {"train.steps\r\n=5"});
  BOOST_TEST(one_printable_line(crlf), crlf);
  BOOST_TEST(contains(crlf, "train.steps\\x0d\\x0a"), crlf);
  const std::string esc = config_error("{}", {"name=\x1b[31mred"});
  BOOST_TEST(one_printable_line(esc), esc);
  BOOST_TEST(contains(esc, "/name: expected UTF-8 text"), esc);
  // Valid UTF-8 names pass.
  BOOST_TEST(config_error("{}", {"name=réseau-γ"}) == "");
  BOOST_TEST(io::printable("a\x01\xe2\x82\xac\xe2\x82") == "a\\x01\xe2\x82\xac\\xe2\\x82");
}

BOOST_AUTO_TEST_CASE(config_files_are_read_only_up_to_a_size_limit) {
  // A device never reaches the size check: only regular files are read (io::open_regular_file).
  const std::string zero = error_of([] { train::load_config("/dev/zero"); });
  BOOST_TEST(zero == "/dev/zero: is a character device, not a regular file");
  testing::TempDir dir;
  const std::string big = write_file(dir, "big.json", "{\"name\": \"" + std::string(2 << 20, 'x') + "\"}");
  BOOST_TEST(contains(error_of([&] { train::load_config(big); }), "larger than 1 MiB"));
}

BOOST_AUTO_TEST_CASE(resume_overrides_are_limited_to_fields_that_keep_the_run_meaning) {
  BOOST_TEST(error_of([] {
               train::check_resume_overrides({"train.steps=100", "train.threads=1", "train.log_every=5",
                                              "train.eval_every=5", "output.checkpoint_every=2",
                                              "output.attention_every=0", "train.memory_limit_gb=4"});
             }) == "");
  for (const std::string field : {"task.kind", "seed", "train.lr", "train.batch_size", "output.dir",
                                  "task.vocab", "model.d_model", "train.eval_size", "name"}) {
    const std::string set = field + "=3";
    std::string pointer = "/" + field;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const std::string message = error_of([&] { train::check_resume_overrides({set}); });
    BOOST_TEST(contains(message, "--set " + set + ": " + pointer + ": cannot change when resuming"), message);
    BOOST_TEST(contains(message, "only train.steps, train.threads"), message);
  }
  BOOST_TEST(contains(error_of([] { train::check_resume_overrides({"train.stepz=3"}); }),
                      "/train/stepz: unknown key"));
}

BOOST_AUTO_TEST_CASE(ids_are_plain_decimals_like_token_names) {
  BOOST_TEST((train::parse_token_ids(12, "0 5 11", "--ids") == std::vector<int32_t>{0, 5, 11}));
  for (const std::string bad :
       {"+3", "-0", "05", "00", "3.0", "0x3", "12", "-1", "99999999999999999999", "３"}) {
    const std::string message = error_of([&] { train::parse_token_ids(12, "0 " + bad, "--ids"); });
    BOOST_TEST(contains(message, "--ids: '" + bad + "' is not a token id in 0..11"),
               bad << " -> " << message);
  }
}

BOOST_AUTO_TEST_CASE(token_errors_escape_control_bytes) {
  const Config c = small_config();
  const auto task = train::make_task(c.task, c.seed);
  const std::string message = error_of([&] { train::parse_token_names(*task, "BOS \x1b[2J", "--tokens"); });
  BOOST_TEST(contains(message, "--tokens: unknown token '\\x1b[2J'"), message);
  BOOST_TEST(one_printable_line(message), message);
  BOOST_TEST(contains(error_of([] { train::parse_token_ids(12, "\x07", "--ids"); }), "'\\x07'"));
}

BOOST_AUTO_TEST_CASE(a_checkpoint_whose_config_claims_a_bigger_model_is_refused_before_building_it) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  const Config config = small_config();
  write_checkpoint(run, config, 2);
  BOOST_TEST(train::load_run(run).model->parameter_count() ==
             static_cast<int64_t>(train::parameter_count(config.model)));
  // d_model 12000 would be 2.3 GB: the file's tensors (a few KB) say otherwise, before any allocation.
  nlohmann::json claimed = train::to_json(config);
  claimed["model"]["d_model"] = 12000;
  set_metadata(io::layout::model_checkpoint(run), "config", claimed.dump());
  const std::string message = error_of([&] { train::load_run(run); });
  BOOST_TEST(contains(message, "model.safetensors: the tensors hold "), message);
  BOOST_TEST(contains(message, "parameters (tensor table)"), message);
}

BOOST_AUTO_TEST_CASE(safetensors_headers_are_capped_at_8_mb_and_out_of_range_numbers_are_one_line) {
  testing::TempDir dir;
  const std::string path = dir.file("big.safetensors");
  std::string header = "{}" + std::string(9'000'000, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(dir, "big.safetensors", bytes + header);
  BOOST_TEST(contains(error_of([&] { train::read_safetensors(path); }),
                      "header size 9000002 is over the limit of 8000000 bytes"));
  header = R"({"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})";
  bytes.clear();
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(dir, "num.safetensors", bytes + header + std::string(4, '\0'));
  const std::string message = error_of([&] { train::read_safetensors(dir.file("num.safetensors")); });
  BOOST_TEST(contains(message, "header is not valid JSON"), message);
  BOOST_TEST(contains(message, "(header)"), message);
  BOOST_TEST(one_printable_line(message), message);
}

BOOST_AUTO_TEST_CASE(optimizer_metadata_is_range_checked) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  const Config config = small_config();
  write_checkpoint(run, config, 5);
  const std::string path = io::layout::optimizer_checkpoint(run, 5);
  BOOST_TEST(optimizer_error(run, config, 5) == "");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"adam_steps", "9223372036854775807", "adam_steps 9223372036854775807 is more than the step 5"},
      {"adam_steps", "18446744073709551615", "adam_steps 18446744073709551615 is more than the step 5"},
      {"rng_has_cached_normal", "2", "expected \"0\" or \"1\" (__metadata__/rng_has_cached_normal)"},
  };
  for (const auto& [key, value, expected] : cases) {
    write_checkpoint(run, config, 5);
    set_metadata(path, key, value);
    const std::string message = optimizer_error(run, config, 5);
    BOOST_TEST(contains(message, expected), key << "=" << value << " -> " << message);
  }
  write_checkpoint(run, config, 5);
  for (int i = 0; i < 4; ++i) set_metadata(path, "rng_s" + std::to_string(i), "0");
  BOOST_TEST(contains(optimizer_error(run, config, 5), "the data generator's state is all zero"));
  // A step beyond any train.steps is refused in both files.
  write_checkpoint(run, config, 5);
  set_metadata(path, "step", "9223372036854775807");
  BOOST_TEST(contains(optimizer_error(run, config, 5), "is beyond any train.steps"));
}
