// attograd import end to end on tests/fixtures/import/ (made by tests/fixtures/make_import_fixtures.py from
// an independent PyTorch forward of each family): each family's folder, imported, gives `attograd forward`
// logits within 1e-4 of the reference's, in float32, bfloat16 and sharded; greedy generation with the KV
// cache picks the full forward's argmax at every step; a bad source is one line on stderr and exit 2.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_command.h"

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::read_all;
using testing::run_attograd;
using testing::shell_quote;

namespace {

fs::path temp_root() {
  static const fs::path root = [] {
    std::string pattern = (fs::temp_directory_path() / "attograd-import-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    return fs::path(pattern);
  }();
  return root;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(temp_root(), ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(Cleanup);

std::string fixture(const std::string& name) {
  return std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/import/" + name;
}

// Imports the Hugging Face folder `src` into the fresh run folder `folder` (under the temporary root) and
// returns the run folder.
std::string import_folder(const std::string& src, const std::string& folder) {
  const std::string out = (temp_root() / folder).string();
  const CommandResult r = run_attograd("import " + shell_quote(src) + " --out " + shell_quote(out));
  BOOST_TEST_REQUIRE(r.exit_code == 0, src << ": " << r.err);
  return out;
}

// Imports the fixture `name` into a fresh run folder and returns the folder.
std::string import_fixture(const std::string& name, const std::string& folder = "") {
  return import_folder(fixture(name), folder.empty() ? name : folder);
}

std::string ids_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Imports the fixture `name` (or `src`, a folder holding the same model) and checks its logits against the
// fixture's reference.
void check_logits(const std::string& name, const std::string& src = "") {
  const nlohmann::json expected = nlohmann::json::parse(read_all(fixture(name) + "/expected.json"));
  const std::vector<int> ids = expected.at("ids").get<std::vector<int>>();
  const std::string run =
      src.empty() ? import_fixture(name) : import_folder(src, "run-" + fs::path(src).filename().string());
  const CommandResult r =
      run_attograd("forward " + shell_quote(run) + " --ids '" + ids_text(ids) + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto logits = nlohmann::json::parse(r.out).at("logits").get<std::vector<std::vector<double>>>();
  const auto want = expected.at("logits").get<std::vector<std::vector<double>>>();
  BOOST_TEST_REQUIRE(logits.size() == want.size());
  double worst = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    BOOST_TEST_REQUIRE(logits[t].size() == want[t].size());
    for (size_t v = 0; v < want[t].size(); ++v) worst = std::max(worst, std::fabs(logits[t][v] - want[t][v]));
  }
  BOOST_TEST(worst < 1e-4, name << ": largest logit difference " << worst);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_logits_equal_the_reference) {
  check_logits("gpt2");
}
BOOST_AUTO_TEST_CASE(gpt2_bfloat16_logits_equal_the_reference) {
  check_logits("gpt2_bf16");
}
BOOST_AUTO_TEST_CASE(gpt_neox_logits_equal_the_reference) {
  check_logits("gpt_neox");
}
BOOST_AUTO_TEST_CASE(gpt_neo_with_global_layers_logits_equal_the_reference) {
  check_logits("gpt_neo_global");
}
BOOST_AUTO_TEST_CASE(gpt_neo_with_local_layers_logits_equal_the_reference) {
  check_logits("gpt_neo");  // attention_types alternating global and local: model.attn_window
}
BOOST_AUTO_TEST_CASE(grouped_query_llama_logits_equal_the_reference) {
  check_logits("llama_gqa");  // num_key_value_heads < num_attention_heads: model.n_kv_heads
}
BOOST_AUTO_TEST_CASE(llama_logits_equal_the_reference) {
  check_logits("llama");
}
BOOST_AUTO_TEST_CASE(sharded_llama_logits_equal_the_reference) {
  check_logits("llama_sharded");
}
// Qwen2 with q/k/v biases, 2 kv heads and its second layer sliding (window 3 of the 10 ids); Qwen2.5-0.5B's
// habits (tied embeddings, sliding fields present but off, transformers 5's rope_parameters); Mistral sliding
// on every layer (window 4).
BOOST_AUTO_TEST_CASE(qwen2_logits_equal_the_reference) {
  check_logits("qwen2");
  const nlohmann::json model =
      nlohmann::json::parse(read_all((temp_root() / "qwen2" / "config.json").string())).at("model");
  BOOST_TEST(model.at("qkv_bias") == true);
  BOOST_TEST(model.at("bias") == false);
  BOOST_TEST(model.at("attn_window") == nlohmann::json({0, 3}));
  BOOST_TEST(model.at("n_kv_heads") == 2);
}
BOOST_AUTO_TEST_CASE(tied_qwen2_logits_equal_the_reference) {
  check_logits("qwen2_tied");
  const nlohmann::json model =
      nlohmann::json::parse(read_all((temp_root() / "qwen2_tied" / "config.json").string())).at("model");
  BOOST_TEST(model.at("tie_embeddings") == true);
  BOOST_TEST((!model.contains("attn_window") || model.at("attn_window").empty()), model.dump());
}
BOOST_AUTO_TEST_CASE(mistral_logits_equal_the_reference) {
  check_logits("mistral");
  const nlohmann::json model =
      nlohmann::json::parse(read_all((temp_root() / "mistral" / "config.json").string())).at("model");
  BOOST_TEST(model.at("attn_window") == nlohmann::json({4}));
  BOOST_TEST(model.at("qkv_bias") == false);
}
std::string altered(const std::string& name, const std::string& from,
                    const std::function<void(nlohmann::json&)>& edit);

// The sliding windows matter: the same weights with every layer global are another model.
BOOST_AUTO_TEST_CASE(the_sliding_window_is_read_from_each_familys_fields) {
  const auto worst_against_reference = [](const std::string& name, const std::string& src) {
    const nlohmann::json expected = nlohmann::json::parse(read_all(fixture(name) + "/expected.json"));
    const std::string run = import_folder(src, "run-" + fs::path(src).filename().string());
    const CommandResult r = run_attograd("forward " + shell_quote(run) + " --ids '" +
                                         ids_text(expected.at("ids").get<std::vector<int>>()) + "' --json");
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    const auto got = nlohmann::json::parse(r.out).at("logits").get<std::vector<std::vector<double>>>();
    const auto want = expected.at("logits").get<std::vector<std::vector<double>>>();
    double worst = 0;
    for (size_t t = 0; t < want.size(); ++t)
      for (size_t v = 0; v < want[t].size(); ++v) worst = std::max(worst, std::fabs(got[t][v] - want[t][v]));
    return worst;
  };
  BOOST_TEST(worst_against_reference("mistral", altered("mistral-global", "mistral", [](nlohmann::json& c) {
                                       c["sliding_window"] = nullptr;
                                     })) > 1e-3);
  BOOST_TEST(worst_against_reference("qwen2", altered("qwen2-off", "qwen2", [](nlohmann::json& c) {
                                       c["use_sliding_window"] = false;
                                     })) > 1e-3);
  // layer_types, as transformers 5 writes them, say the same as max_window_layers.
  check_logits("qwen2", altered("qwen2-types", "qwen2", [](nlohmann::json& c) {
                 c.erase("max_window_layers");
                 c["layer_types"] = {"full_attention", "sliding_attention"};
               }));
}
BOOST_AUTO_TEST_CASE(gpt2_with_its_bpe_tokenizer_logits_equal_the_reference) {
  check_logits("gpt2_bpe");  // the fine-tuning tests' model
}

// scripts/import_nanogpt.py's folder (a nanoGPT checkpoint with a character meta.pkl): the run's task is its
// characters, so a prompt is text and the ids are nanoGPT's.
BOOST_AUTO_TEST_CASE(nanogpt_logits_equal_the_reference_and_prompts_are_text) {
  check_logits("nanogpt");
  const std::string run = import_fixture("nanogpt", "nanogpt-prompt");
  const nlohmann::json config = nlohmann::json::parse(read_all(run + "/config.json"));
  BOOST_TEST(config.at("task").at("kind") == "text");
  BOOST_TEST(config.at("model").at("activation") == "gelu_erf");
  const CommandResult g =
      run_attograd("generate " + shell_quote(run) + " --prompt 'ROMEO:' --max-new 5 --temperature 0 --json");
  BOOST_TEST_REQUIRE(g.exit_code == 0, g.err);
  const nlohmann::json j = nlohmann::json::parse(g.out);
  BOOST_TEST(j.at("prompt") == nlohmann::json({"R", "O", "M", "E", "O", ":"}));
  BOOST_TEST(j.at("generated").size() == 5u);
  // The prompt's ids are nanoGPT's (meta.pkl's stoi: the sorted characters).
  const nlohmann::json expected = nlohmann::json::parse(read_all(fixture("nanogpt") + "/expected.json"));
  const std::vector<int> ids = j.at("ids").get<std::vector<int>>();
  const std::vector<int> want = expected.at("ids").get<std::vector<int>>();
  BOOST_TEST(
      std::vector<int>(ids.begin(), ids.begin() + 6) == std::vector<int>(want.begin(), want.begin() + 6),
      boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_run_says_where_it_came_from) {
  const std::string run = (temp_root() / "marker").string();
  const CommandResult r =
      run_attograd("import " + shell_quote(fixture("gpt2_bf16")) + " --out " + shell_quote(run) + " --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json printed = nlohmann::json::parse(r.out);
  const nlohmann::json marker = nlohmann::json::parse(read_all(run + "/imported.json"));
  BOOST_TEST(marker == printed);
  BOOST_TEST(marker.at("family") == "gpt2");
  BOOST_TEST(marker.at("dtypes") == nlohmann::json({"BF16"}));
  BOOST_TEST(marker.at("source") == fs::canonical(fixture("gpt2_bf16")).string());
  // GPT-2's shape: 2 blocks of (ln1, Wq, Wk, Wv, Wo, ln2, fc1, fc2) plus embeddings, ln_f, lm_head's bias.
  const int64_t D = 16, F = 64, V = 50, P = 32;
  BOOST_TEST(marker.at("params").get<int64_t>() ==
             V * D + P * D + 2 * (4 * D + 4 * (D * D + D) + 2 * D * F + F + D) + 2 * D + V);
}

BOOST_AUTO_TEST_CASE(cached_generation_follows_the_full_forward) {
  for (const std::string name : {"gpt2", "gpt_neox", "llama", "qwen2", "qwen2_tied", "mistral"}) {
    const std::string run = import_fixture(name, std::string("generate-") + name);
    const CommandResult g = run_attograd("generate " + shell_quote(run) +
                                         " --tokens '3 17 5' --max-new 12 --temperature 0 --json");
    BOOST_TEST_REQUIRE(g.exit_code == 0, g.err);
    const std::vector<int> ids = nlohmann::json::parse(g.out).at("ids").get<std::vector<int>>();
    BOOST_TEST_REQUIRE(ids.size() == 15u);
    std::vector<int> input(ids.begin(), ids.end() - 1);
    const CommandResult f =
        run_attograd("forward " + shell_quote(run) + " --ids '" + ids_text(input) + "' --json");
    BOOST_TEST_REQUIRE(f.exit_code == 0, f.err);
    const auto predictions = nlohmann::json::parse(f.out).at("predictions").get<std::vector<int>>();
    for (size_t t = 2; t + 1 < ids.size(); ++t)
      BOOST_TEST(predictions[t] == ids[t + 1], name << " position " << t);
  }
}

// patch, lens and circuits read the imported Qwen2 and Mistral models (their random-token task: ids named by
// their numbers), sliding windows and q/k/v biases included.
BOOST_AUTO_TEST_CASE(the_study_tools_run_on_qwen2_and_mistral) {
  const std::string clean = "3 17 5 42 0 9 31 17 5 42", corrupt = "3 17 5 42 0 9 31 17 8 42";
  for (const std::string name : {"qwen2", "qwen2_tied", "mistral"}) {
    const std::string run = shell_quote(import_fixture(name, "tools-" + name));
    for (const std::string& tool :
         {"patch " + run + " --clean '" + clean + "' --corrupt '" + corrupt +
              "' --answer 0 --wrong 9 --attribution --json",
          "lens " + run + " --tokens '" + clean + "' --answer 0 --json", "circuits " + run + " --json"}) {
      const CommandResult t = run_attograd(tool);
      BOOST_TEST(t.exit_code == 0, tool << ": " << t.err);
      if (t.exit_code == 0) BOOST_TEST(!nlohmann::json::parse(t.out).empty(), tool);
    }
  }
}

// A copy of a fixture with config.json changed by `edit`, or a file replaced.
std::string altered(const std::string& name, const std::string& from,
                    const std::function<void(nlohmann::json&)>& edit) {
  const fs::path dir = temp_root() / ("src-" + name);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(fixture(from)))
    fs::copy_file(entry.path(), dir / entry.path().filename(), fs::copy_options::overwrite_existing);
  nlohmann::json config = nlohmann::json::parse(read_all((dir / "config.json").string()));
  edit(config);
  std::ofstream(dir / "config.json") << config.dump();
  return dir.string();
}

// transformers 5 writes the rotary settings as rope_parameters (and GPT-NeoX's rotary_pct and rotary_emb_base
// as its partial_rotary_factor and rope_theta); a GPT-NeoX config without any rotates a quarter of each
// head, transformers' default. Each spelling gives the reference's logits.
BOOST_AUTO_TEST_CASE(every_spelling_of_the_rotary_settings_gives_the_same_logits) {
  check_logits("llama", altered("llama-v5", "llama", [](nlohmann::json& c) {
                 c.erase("rope_theta");
                 c.erase("rope_scaling");
                 c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}};
               }));
  check_logits("gpt_neox", altered("neox-v5", "gpt_neox", [](nlohmann::json& c) {
                 c.erase("rotary_pct");
                 c.erase("rotary_emb_base");
                 c["rope_parameters"] = {
                     {"rope_type", "default"}, {"rope_theta", 10000}, {"partial_rotary_factor", 0.25}};
               }));
  check_logits("gpt_neox", altered("neox-defaults", "gpt_neox", [](nlohmann::json& c) {
                 c.erase("rotary_pct");
                 c.erase("rotary_emb_base");
               }));
  // The fraction matters: half of each head rotated is another model.
  const std::string half = altered("neox-half", "gpt_neox", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"partial_rotary_factor", 0.5}};
  });
  const std::string run = import_folder(half, "run-neox-half");
  const nlohmann::json config = nlohmann::json::parse(read_all(run + "/config.json"));
  BOOST_TEST(config.at("model").at("rotary_fraction").get<double>() == 0.5);
}

// Pythia's tokenizer.json normalizes text to NFC. A model imported with such a tokenizer reads its prompts
// through it: a decomposed accent ("e" + U+0301) gets the precomposed U+00E9's tokens, where the same
// model without the normalizer gives other tokens.
BOOST_AUTO_TEST_CASE(a_normalizing_tokenizer_imports_and_normalizes_prompts) {
  const std::string src = altered("nfc", "gpt2_bpe", [](nlohmann::json&) {});
  nlohmann::json tokenizer = nlohmann::json::parse(read_all(src + "/tokenizer.json"));
  tokenizer["normalizer"] = {{"type", "NFC"}};
  std::ofstream(src + "/tokenizer.json") << tokenizer.dump();
  const std::string nfc = import_folder(src, "run-nfc");
  const std::string plain = import_fixture("gpt2_bpe", "run-no-nfc");
  const auto ids_of = [](const std::string& run, const std::string& prompt) {
    const CommandResult f =
        run_attograd("forward " + shell_quote(run) + " --prompt " + shell_quote(prompt) + " --json");
    BOOST_TEST_REQUIRE(f.exit_code == 0, f.err);
    return nlohmann::json::parse(f.out).at("ids");
  };
  const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";
  BOOST_TEST(ids_of(nfc, decomposed) == ids_of(plain, composed));
  BOOST_TEST(ids_of(plain, decomposed) != ids_of(plain, composed));
}

BOOST_AUTO_TEST_CASE(what_cannot_be_imported_is_one_line_and_exit_2) {
  struct Case {
    std::string src, expected;
  };
  const std::vector<Case> cases = {
      {altered("rope", "llama",
               [](nlohmann::json& c) {
                 c["rope_scaling"] = {{"type", "linear"}};
               }),
       "rope_scaling.type: \"linear\" is not supported"},
      {altered("rope-v5", "llama",
               [](nlohmann::json& c) {
                 c["rope_parameters"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"rope_theta", 5e5}};
               }),
       "rope_parameters.rope_type: \"llama3\" is not supported"},
      {altered("rope-layers", "llama",
               [](nlohmann::json& c) {
                 c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
               }),
       "rope_parameters.full_attention: rotary parameters per layer type"},
      {altered("rope-partial", "llama", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.5; }),
       "partial_rotary_factor"},
      {altered("rope-theta", "gpt_neox",
               [](nlohmann::json& c) {
                 c["rope_parameters"] = {{"rope_theta", "big"}};
               }),
       "rope_parameters.rope_theta: expected a positive number"},
      {altered("gqa", "llama", [](nlohmann::json& c) { c["num_key_value_heads"] = 2; }),
       "k_proj.weight: shape [16, 16], but config.json implies [8, 16]"},
      {altered("type", "gpt2", [](nlohmann::json& c) { c["model_type"] = "t5"; }), "model_type"},
      {altered("qwen2-types", "qwen2",
               [](nlohmann::json& c) {
                 c["layer_types"] = {"full_attention", "chunked_attention"};
               }),
       "layer_types: \"chunked_attention\" is not supported"},
      {altered("qwen2-types-count", "qwen2",
               [](nlohmann::json& c) { c["layer_types"] = {"full_attention"}; }),
       "layer_types: expected one of"},
      {altered("qwen2-window", "qwen2", [](nlohmann::json& c) { c["sliding_window"] = 0; }),
       "sliding_window: expected a positive integer, got 0"},
      {altered("qwen2-yarn", "qwen2",
               [](nlohmann::json& c) {
                 c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
               }),
       "rope_scaling.type: \"yarn\" is not supported"},
      {altered("qwen2-bias", "qwen2", [](nlohmann::json& c) { c["num_key_value_heads"] = 4; }),
       "k_proj.weight: shape [8, 16], but config.json implies [16, 16]"},
      {altered("mistral-head", "mistral", [](nlohmann::json& c) { c["head_dim"] = 8; }),
       "head_dim: 8 is not supported"},
      {altered("act", "gpt_neox", [](nlohmann::json& c) { c["hidden_act"] = "relu"; }), "hidden_act"},
      {altered("width", "gpt2", [](nlohmann::json& c) { c["n_embd"] = 32; }), "wte.weight"},
      // Each family's dimensions under its own names: a required one missing, an optional one invalid.
      {altered("no-heads", "gpt_neo", [](nlohmann::json& c) { c.erase("num_heads"); }),
       "num_heads: missing, expected a positive integer"},
      {altered("no-ff", "llama", [](nlohmann::json& c) { c.erase("intermediate_size"); }),
       "intermediate_size: missing, expected a positive integer"},
      {altered("bad-inner", "gpt2", [](nlohmann::json& c) { c["n_inner"] = 0; }),
       "n_inner: expected a positive integer, got 0"},
      {altered("no-positions", "gpt_neox", [](nlohmann::json& c) { c.erase("max_position_embeddings"); }),
       "max_position_embeddings: missing"},
      {fixture("does-not-exist"), "src"},
  };
  for (const Case& c : cases) {
    const std::string out = (temp_root() / "refused").string();
    const CommandResult r = run_attograd("import " + shell_quote(c.src) + " --out " + shell_quote(out));
    BOOST_TEST(r.exit_code == 2, c.src << ": " << r.err);
    BOOST_TEST(r.err.find(c.expected) != std::string::npos, c.src << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(!fs::exists(out), "a refused import leaves no run folder: " << c.src);
  }

  // A truncated safetensors file names the file.
  const std::string src = altered("truncated", "gpt2", [](nlohmann::json&) {});
  fs::resize_file(fs::path(src) / "model.safetensors",
                  fs::file_size(fs::path(src) / "model.safetensors") - 3);
  const CommandResult r =
      run_attograd("import " + shell_quote(src) + " --out " + shell_quote((temp_root() / "t").string()));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("model.safetensors") != std::string::npos, r.err);

  // An occupied output folder is refused.
  const std::string taken = import_fixture("llama", "taken");
  const CommandResult again =
      run_attograd("import " + shell_quote(fixture("llama")) + " --out " + shell_quote(taken));
  BOOST_TEST(again.exit_code == 2);
  BOOST_TEST(again.err.find("out:") != std::string::npos, again.err);
}

namespace {

// Each row's log-softmax.
std::vector<std::vector<double>> log_softmax(const std::vector<std::vector<double>>& logits) {
  std::vector<std::vector<double>> out = logits;
  for (auto& row : out) {
    const double top = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (double x : row) sum += std::exp(x - top);
    for (double& x : row) x -= top + std::log(sum);
  }
  return out;
}

std::vector<std::vector<double>> forward_logits(const std::string& run, const std::vector<int>& ids) {
  const CommandResult r =
      run_attograd("forward " + shell_quote(run) + " --ids '" + ids_text(ids) + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  return nlohmann::json::parse(r.out).at("logits").get<std::vector<std::vector<double>>>();
}

}  // namespace

// ---- Fine-tuning: model.init_from (docs/import.md "Fine-tuning") ----

namespace {

// A fine-tuning config for the imported run `from`: the model section is the run's own (config.json's, as
// docs/import.md says to copy it) plus init_from; the text is configs/text.json's, encoded by the run's
// tokenizer.
nlohmann::json finetune_config(const std::string& from, int steps) {
  nlohmann::json model = nlohmann::json::parse(read_all(from + "/config.json")).at("model");
  model["init_from"] = from;
  const nlohmann::json text =
      nlohmann::json::parse(read_all(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/text.json"));
  return {{"name", "finetune"},
          {"seed", 3},
          {"task",
           {{"kind", "text"},
            {"path", text.at("task").at("path")},
            {"unit", "bpe"},
            {"tokenizer", from + "/tokenizer.json"},
            {"length", 32}}},
          {"model", model},
          {"train",
           {{"steps", steps},
            {"batch_size", 8},
            {"lr", 0.003},
            {"warmup", 5},
            {"schedule", "constant"},
            {"eval_every", 10},
            {"log_every", 10},
            {"eval_size", 32},
            {"threads", 2}}},
          {"output", {{"attention_every", 0}, {"probes", 0}, {"checkpoint_every", 0}}}};
}

std::string write_config(const std::string& name, const nlohmann::json& config) {
  const std::string path = (temp_root() / (name + ".json")).string();
  std::ofstream(path) << config.dump(2);
  return path;
}

std::vector<nlohmann::json> metrics_of(const std::string& run) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(read_all(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

// attograd import --process saves TransformerLens's processed weights (analysis/processing.h). For every
// family (LayerNorm and RMSNorm, learned and rotary positions, parallel blocks, SwiGLU, grouped-query heads,
// local windows): the log-probabilities equal the unprocessed run's within 1e-4 (the logits move by a
// constant per position), the processed logits sum to 0 over the vocabulary (center_unembed) where the
// source's do not, imported.json says what each step did, and `circuits --processed` reads the processed run.
BOOST_AUTO_TEST_CASE(processed_imports_keep_the_log_probabilities) {
  for (const std::string name :
       {"gpt2", "gpt_neox", "gpt_neo", "llama", "llama_gqa", "nanogpt", "qwen2", "qwen2_tied", "mistral"}) {
    const std::vector<int> ids =
        nlohmann::json::parse(read_all(fixture(name) + "/expected.json")).at("ids").get<std::vector<int>>();
    const std::string plain = import_fixture(name, "plain-" + name);
    const std::string run = (temp_root() / ("processed-" + name)).string();
    const CommandResult r = run_attograd("import " + shell_quote(fixture(name)) + " --out " +
                                         shell_quote(run) + " --process --json");
    BOOST_TEST_REQUIRE(r.exit_code == 0, name << ": " << r.err);
    const nlohmann::json marker = nlohmann::json::parse(read_all(run + "/imported.json"));
    BOOST_TEST(marker == nlohmann::json::parse(r.out));
    BOOST_TEST(marker.at("processed") == true);
    const nlohmann::json& steps = marker.at("processing");
    BOOST_TEST(steps.size() == 4u, steps.dump());
    const bool rms = name.rfind("llama", 0) == 0 || name.rfind("qwen2", 0) == 0 || name == "mistral";
    for (const char* step : {"fold_ln", "center_unembed"})
      BOOST_TEST(steps.at(step).get<std::string>().rfind("skipped", 0) != 0, name << ": " << steps.dump());
    // RMSNorm does not centre its input: the stream's writers stay. Llama and Mistral have no value biases;
    // Qwen2's stay, its o_proj having no bias to take them.
    BOOST_TEST((steps.at("center_writing_weights").get<std::string>().rfind("skipped", 0) == 0) == rms,
               name << ": " << steps.dump());
    BOOST_TEST((steps.at("fold_value_biases").get<std::string>().rfind("skipped", 0) == 0) == rms,
               name << ": " << steps.dump());
    BOOST_TEST(nlohmann::json::parse(read_all(run + "/config.json")).at("model").at("tie_embeddings") ==
               false);

    const auto want = forward_logits(plain, ids), got = forward_logits(run, ids);
    BOOST_TEST_REQUIRE(got.size() == want.size());
    const auto want_lp = log_softmax(want), got_lp = log_softmax(got);
    double worst = 0, plain_mean = 0, processed_mean = 0;
    for (size_t t = 0; t < want.size(); ++t) {
      double a = 0, b = 0;
      for (size_t v = 0; v < want[t].size(); ++v) {
        worst = std::max(worst, std::fabs(got_lp[t][v] - want_lp[t][v]));
        a += want[t][v] / double(want[t].size());
        b += got[t][v] / double(got[t].size());
      }
      plain_mean = std::max(plain_mean, std::fabs(a));
      processed_mean = std::max(processed_mean, std::fabs(b));
    }
    BOOST_TEST(worst < 1e-4, name << ": largest log-probability difference " << worst);
    BOOST_TEST(processed_mean < 1e-5, name << ": a row's mean logit " << processed_mean);
    BOOST_TEST(plain_mean > 1e-3,
               name << ": the source's logits were centred already (" << plain_mean << ")");

    const CommandResult c = run_attograd("circuits " + shell_quote(run) + " --processed --json");
    BOOST_TEST(c.exit_code == 0, name << ": " << c.err);
  }
}

// The issue's "done when": an imported GPT-2-layout model fine-tuned on configs/text.json's text through its
// own tokenizer lowers the held-out loss from its start (metrics.jsonl's step 0 line: the imported weights),
// and a run stopped half way and resumed ends with the uninterrupted run's bytes (the resume continues from
// its checkpoint, not from init_from's weights).
BOOST_AUTO_TEST_CASE(fine_tuning_an_imported_model_lowers_the_held_out_loss_and_resumes_bit_exactly) {
  const std::string from = import_fixture("gpt2_bpe", "finetune_from");
  const std::string whole = (temp_root() / "finetune_whole").string();
  const std::string config = write_config("finetune", finetune_config(from, 40));
  const CommandResult r = run_attograd("train " + shell_quote(config) + " --out " + shell_quote(whole));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("starting from the weights of " + from) != std::string::npos, r.out);
  const nlohmann::json stored = nlohmann::json::parse(read_all(whole + "/config.json"));
  BOOST_TEST(stored.at("model").at("init_from") == from);  // recorded: the run is reproducible
  BOOST_TEST(stored.at("model").at("vocab") == 657);       // the tokenizer's vocabulary, the model's

  const std::vector<nlohmann::json> metrics = metrics_of(whole);
  BOOST_TEST_REQUIRE(metrics.size() >= 2u);
  BOOST_TEST(metrics.front().at("step") == 0);
  const double start = metrics.front().at("eval_loss").get<double>();
  const double end = metrics.back().at("eval_loss").get<double>();
  BOOST_TEST(metrics.back().at("step") == 40);
  BOOST_TEST(end < start - 0.5, "held-out loss " << start << " -> " << end);
  BOOST_TEST_MESSAGE("fine-tuning gpt2_bpe 40 steps: held-out loss " << start << " -> " << end);

  // The step-0 loss is the imported weights': a run from the random init starts elsewhere.
  nlohmann::json fresh = finetune_config(from, 1);
  fresh["model"].erase("init_from");
  const std::string scratch = (temp_root() / "finetune_scratch").string();
  BOOST_TEST_REQUIRE(
      run_attograd("train " + shell_quote(write_config("scratch", fresh)) + " --out " + shell_quote(scratch))
          .exit_code == 0);
  BOOST_TEST(metrics_of(scratch).front().at("step") == 1);  // no step-0 line without init_from

  // Stopped at step 20 (its own config says 20), resumed to 40: the uninterrupted run's bytes.
  const std::string split = (temp_root() / "finetune_split").string();
  BOOST_TEST_REQUIRE(run_attograd("train " + shell_quote(write_config("half", finetune_config(from, 20))) +
                                  " --out " + shell_quote(split))
                         .exit_code == 0);
  const CommandResult resumed =
      run_attograd("train --resume " + shell_quote(split) + " --set train.steps=40");
  BOOST_TEST_REQUIRE(resumed.exit_code == 0, resumed.err);
  BOOST_TEST(resumed.out.find("starting from the weights") == std::string::npos, resumed.out);
  // Equal weights give equal logits, bit for bit (the JSON prints each float's shortest round trip).
  const std::string ids = " --ids '3 17 5 42 0 9 31' --json";
  const CommandResult a = run_attograd("forward " + shell_quote(split) + ids);
  const CommandResult b = run_attograd("forward " + shell_quote(whole) + ids);
  BOOST_TEST_REQUIRE(a.exit_code == 0, a.err);
  BOOST_TEST(nlohmann::json::parse(a.out).at("logits") == nlohmann::json::parse(b.out).at("logits"));
  BOOST_TEST(metrics_of(split).back().at("eval_loss") == metrics.back().at("eval_loss"));
}

// import --text: the run's task is a text task over that file, encoded by the model's tokenizer, so the tools
// that draw sequences (eval, sae, circuits' attribution, detect without a prompt) read an imported model; a
// folder without tokenizer.json, or a missing file, is one line and exit 2.
BOOST_AUTO_TEST_CASE(a_text_gives_an_imported_model_data_for_every_tool) {
  const std::string text =
      nlohmann::json::parse(read_all(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/text.json"))
          .at("task")
          .at("path");
  const std::string run = (temp_root() / "gpt2_bpe_text").string();
  const CommandResult r = run_attograd("import " + shell_quote(fixture("gpt2_bpe")) + " --out " +
                                       shell_quote(run) + " --text " + shell_quote(text));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json task = nlohmann::json::parse(read_all(run + "/config.json")).at("task");
  BOOST_TEST(task.at("kind") == "text");
  BOOST_TEST(task.at("unit") == "bpe");
  BOOST_TEST(task.at("path") == text);
  // The same weights as the data-less import: the logits of one input are equal.
  const std::string plain = import_fixture("gpt2_bpe", "gpt2_bpe_plain");
  const std::string ids = " --ids '3 17 5 42 0 9 31' --json";
  const CommandResult a = run_attograd("forward " + shell_quote(run) + ids);
  const CommandResult b = run_attograd("forward " + shell_quote(plain) + ids);
  BOOST_TEST_REQUIRE(a.exit_code == 0, a.err);
  BOOST_TEST(nlohmann::json::parse(a.out).at("logits") == nlohmann::json::parse(b.out).at("logits"));

  const CommandResult eval = run_attograd("eval " + shell_quote(run) + " --json");
  BOOST_TEST_REQUIRE(eval.exit_code == 0, eval.err);
  const double loss = nlohmann::json::parse(eval.out).at("eval_loss").get<double>();
  BOOST_TEST((std::isfinite(loss) && loss > 0), eval.out);
  // The data-less import refuses what the text import serves.
  const CommandResult refused = run_attograd("eval " + shell_quote(plain) + " --json");
  BOOST_TEST(refused.exit_code == 2);
  const std::string sae_config = write_config(
      "sae_text",
      {{"steps", 20}, {"batch_size", 64}, {"buffer_tokens", 256}, {"eval_sequences", 4}, {"warmup", 2}});
  for (const std::string& tool : {"circuits " + shell_quote(run) + " --json",
                                  "detect " + shell_quote(run) + " --pattern previous --n 4 --json",
                                  "sae " + shell_quote(run) + " --at blocks.0.resid_post --config " +
                                      shell_quote(sae_config) + " --json"}) {
    const CommandResult t = run_attograd(tool);
    BOOST_TEST(t.exit_code == 0, tool << ": " << t.err);
  }

  const std::string no_tokenizer = (temp_root() / "gpt2_text_refused").string();
  const CommandResult c = run_attograd("import " + shell_quote(fixture("gpt2")) + " --out " +
                                       shell_quote(no_tokenizer) + " --text " + shell_quote(text));
  BOOST_TEST(c.exit_code == 2);
  BOOST_TEST(c.err.find("text: ") != std::string::npos, c.err);
  BOOST_TEST(c.err.find("tokenizer.json") != std::string::npos, c.err);
  BOOST_TEST(!std::filesystem::exists(no_tokenizer));
  const CommandResult d = run_attograd("import " + shell_quote(fixture("gpt2_bpe")) + " --out " +
                                       shell_quote((temp_root() / "gpt2_bpe_missing").string()) +
                                       " --text /nonexistent/text.txt");
  BOOST_TEST(d.exit_code == 2);
  BOOST_TEST(d.err.find("text: /nonexistent/text.txt: not a file") != std::string::npos, d.err);
}

// What does not fit is one line and exit 2: a model section that differs from the run's (each field named
// with both values), a tokenizer whose vocabulary is not the model's, a folder that is not a run.
BOOST_AUTO_TEST_CASE(init_from_refuses_what_does_not_fit_in_one_line) {
  const std::string from = import_fixture("gpt2_bpe", "refuse_from");
  nlohmann::json wider = finetune_config(from, 2);
  wider["model"]["d_ff"] = 32;
  nlohmann::json chars = finetune_config(from, 2);  // characters, not the run's tokenizer
  chars["task"]["unit"] = "char";
  chars["task"].erase("tokenizer");
  chars["model"]["vocab"] = 0;
  nlohmann::json missing = finetune_config(from, 2);
  missing["model"]["init_from"] = (temp_root() / "no-such-run").string();
  nlohmann::json not_a_run = finetune_config(from, 2);
  not_a_run["model"]["init_from"] = fixture("gpt2_bpe");  // the Hugging Face folder, not imported
  struct Case {
    std::string name;
    nlohmann::json config;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"wider", wider, "model.d_ff is 32 here but 64 in " + from + "/config.json"},
      {"chars", chars, "model.vocab is "},
      {"missing", missing, "no-such-run: not a folder"},
      {"not_a_run", not_a_run, "no " + fixture("gpt2_bpe") + "/checkpoint/model.safetensors"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_attograd("train " + shell_quote(write_config(c.name, c.config)) + " --out " +
                                         shell_quote((temp_root() / ("refused_" + c.name)).string()));
    BOOST_TEST(r.exit_code == 2, c.name << ": " << r.err);
    BOOST_TEST(r.err.find(c.expected) != std::string::npos, c.name << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, c.name << ": " << r.err);
  }
}
