// attograd generate end to end, on runs trained by the real binary: a reverse run trained until it
// reverses completes a prompt greedily with the reversal; on a barely trained run, the same seed gives the
// same tokens, different seeds differ at temperature 1, greedy decoding is the argmax of `forward`'s
// logits (the full forward) at every step, --max-new and max_len stop it and say so, --prompt and --tokens
// agree, BOS is put in front; every bad input is one line on stderr and exit 2.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_command.h"

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_attograd;
using testing::shell_quote;

namespace {

fs::path temp_root() {
  static const fs::path root = [] {
    std::string pattern = (fs::temp_directory_path() / "attograd-generate-XXXXXX").string();
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

std::string train_run(const std::string& name, const std::string& sets) {
  const std::string d = (temp_root() / name).string();
  const CommandResult r = run_attograd(
      "train " + shell_quote(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/reverse.json") + " --out " +
      shell_quote(d) + " " + sets + " --set output.attention_every=0 --set output.checkpoint_every=0");
  if (r.exit_code != 0) throw std::runtime_error("training the test run " + name + " failed: " + r.err);
  return d;
}

// Reverse with 8 values of 10 (max_len 17), 2 layers x 2 heads, d_model 16: 30 steps, far from trained.
const std::string& barely_trained() {
  static const std::string dir =
      train_run("rev",
                "--set train.steps=30 --set model.d_model=16 --set model.n_heads=2 --set model.n_layers=2"
                " --set model.d_ff=32 --set train.eval_size=64");
  return dir;
}

// Reverse with 3 values of 4 (BOS a b c SEP c b a: max_len 7), trained until it reverses.
const std::string& trained() {
  static const std::string dir =
      train_run("rev-small",
                "--set task.vocab=4 --set task.length=3 --set train.steps=400 --set train.warmup=20"
                " --set model.d_model=32 --set model.d_ff=64 --set train.eval_every=400"
                " --set train.eval_size=64");
  return dir;
}

nlohmann::json generate_json(const std::string& run, const std::string& args) {
  const CommandResult r = run_attograd("generate " + shell_quote(run) + " " + args + " --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, args << ": " << r.err);
  return nlohmann::json::parse(r.out);
}

size_t lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(completions)

BOOST_AUTO_TEST_CASE(a_trained_reverse_run_completes_prompts_greedily) {
  int right = 0, total = 0;
  for (const std::vector<int>& v :
       std::vector<std::vector<int>>{{3, 1, 2}, {0, 2, 1}, {1, 1, 3}, {2, 0, 0}}) {
    const std::string prompt =
        "BOS " + std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + " SEP";
    const nlohmann::json j = generate_json(trained(), "--tokens " + prompt + " --temperature 0");
    const std::vector<std::string> want = {std::to_string(v[2]), std::to_string(v[1]), std::to_string(v[0])};
    ++total;
    right += j.at("generated").get<std::vector<std::string>>() == want;
    BOOST_TEST(j.at("stopped") == "max_len");  // 5 + 3 = max_len 7 + 1
  }
  BOOST_TEST(right == total, right << " of " << total << " prompts reversed");
}

BOOST_AUTO_TEST_CASE(text_output_shows_the_prompt_the_tokens_and_why_it_stopped) {
  const CommandResult r =
      run_attograd("generate " + shell_quote(trained()) + " --tokens 3 1 2 SEP --temperature 0");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("BOS put in front") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("prompt:    BOS 3 1 2 SEP\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("generated: 2 1 3\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("stopped: max_len (the model reads at most 7 tokens)") != std::string::npos, r.out);
  BOOST_TEST(r.err.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(determinism)

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_tokens_and_seeds_differ) {
  const std::string args = "--tokens BOS 3 1 4 1 5 9 2 6 SEP --temperature 1";
  const nlohmann::json a = generate_json(barely_trained(), args + " --seed 7");
  const nlohmann::json b = generate_json(barely_trained(), args + " --seed 7");
  BOOST_TEST(a.dump() == b.dump());
  BOOST_TEST(a.at("generated").size() == 8u);  // 10 + 8 = max_len 17 + 1
  bool differ = false;
  for (int seed : {8, 9, 10})
    differ |= generate_json(barely_trained(), args + " --seed " + std::to_string(seed)) != a;
  BOOST_TEST(differ);
}

BOOST_AUTO_TEST_CASE(greedy_is_the_argmax_of_the_full_forward_at_every_step) {
  const nlohmann::json g = generate_json(barely_trained(), "--tokens BOS 3 1 4 SEP --temperature 0");
  const std::vector<int> ids = g.at("ids").get<std::vector<int>>();
  const size_t P = g.at("prompt").size();
  BOOST_TEST_REQUIRE(ids.size() == 18u);  // 5 + 13 generated: max_len 17 read
  // `forward` runs the full (uncached) forward over all but the last token: its prediction at position t
  // is the argmax of the logits the t+1-th token was drawn from.
  std::string input;
  for (size_t i = 0; i + 1 < ids.size(); ++i) input += (i ? " " : "") + std::to_string(ids[i]);
  const CommandResult r =
      run_attograd("forward " + shell_quote(barely_trained()) + " --ids '" + input + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const std::vector<int> predictions = nlohmann::json::parse(r.out).at("predictions").get<std::vector<int>>();
  for (size_t t = P - 1; t + 1 < ids.size(); ++t) BOOST_TEST(predictions[t] == ids[t + 1], "position " << t);
}

BOOST_AUTO_TEST_CASE(top_k_one_is_greedy) {
  const std::string args = "--tokens BOS 3 1 4 SEP";
  BOOST_TEST(generate_json(barely_trained(), args + " --temperature 0") ==
             generate_json(barely_trained(), args + " --temperature 5 --top-k 1 --seed 3"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(max_new_stops_early_and_says_so) {
  const nlohmann::json j = generate_json(barely_trained(), "--tokens BOS 3 1 4 SEP --max-new 2 --seed 1");
  BOOST_TEST(j.at("generated").size() == 2u);
  BOOST_TEST(j.at("ids").size() == 7u);
  BOOST_TEST(j.at("stopped") == "max_new");
  BOOST_TEST(generate_json(barely_trained(), "--tokens BOS 3 --max-new 0").at("generated").empty());
  const CommandResult r =
      run_attograd("generate " + shell_quote(barely_trained()) + " --tokens BOS 3 --max-new 3");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("stopped: max_new (3 tokens)") != std::string::npos, r.out);
  BOOST_TEST(lines(r.out) == 3u, r.out);
}

BOOST_AUTO_TEST_CASE(prompt_and_tokens_agree_and_bos_is_put_in_front) {
  const nlohmann::json a = generate_json(barely_trained(), "--prompt '3 1 4 SEP' --seed 2");
  const nlohmann::json b = generate_json(barely_trained(), "--tokens 3 1 4 SEP --seed 2");
  const nlohmann::json c = generate_json(barely_trained(), "--tokens 'BOS 3 1 4 SEP' --seed 2");
  BOOST_TEST(a == b);
  BOOST_TEST(a == c);
  BOOST_TEST(a.at("prompt").dump() == R"(["BOS","3","1","4","SEP"])");
}

BOOST_AUTO_TEST_CASE(a_prompt_of_max_len_tokens_gives_one_token) {
  const nlohmann::json j = generate_json(barely_trained(), "--tokens BOS 1 2 3 4 5 6 7 8 SEP 8 7 6 5 4 3 2");
  BOOST_TEST(j.at("generated").size() == 1u);
  BOOST_TEST(j.at("stopped") == "max_len");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(bad_input_is_one_line_and_exit_2) {
  const std::string run = shell_quote(barely_trained());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tokens BOS 3 x SEP", "tokens: unknown token 'x'"},
      {"--prompt '3 1 zz'", "prompt: unknown token 'zz'"},
      {"--prompt ''", "prompt: expected at least one token"},
      {"--prompt '   '", "prompt: expected at least one token"},
      {"--tokens BOS 1 2 3 4 5 6 7 8 SEP 8 7 6 5 4 3 2 1",
       "18 tokens, but the model takes at most max_len 17"},
      {"--tokens 3 --temperature -1", "--temperature: must be >= 0, got -1"},
      {"--tokens 3 --temperature nan", "temperature"},
      {"--tokens 3 --temperature inf", "temperature"},
      {"--tokens 3 --top-k -2", "--top-k: must be >= 0, got -2"},
      {"--tokens 3 --max-new -1", "--max-new"},
      {"--tokens 3 --seed -1", "--seed"},
      {"--tokens 3 --prompt 3", "excludes"},
      {"", "give --prompt or --tokens"},
      {"--tokens", "--tokens"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = run_attograd("generate " + run + " " + args);
    BOOST_TEST(r.exit_code == 2, args << ": exit " << r.exit_code);
    BOOST_TEST(r.err.find(message) != std::string::npos, args << ": " << r.err);
    BOOST_TEST(lines(r.err) == 1u, args << ": " << r.err);
    BOOST_TEST(r.out.empty(), args << ": " << r.out);
  }
  // A control sequence in a token comes back escaped, not sent to the terminal.
  const CommandResult esc = run_attograd("generate " + run + " --prompt \"$(printf '3 \\033[2J')\"");
  BOOST_TEST(esc.exit_code == 2);
  BOOST_TEST(esc.err.find('\033') == std::string::npos, esc.err);
  BOOST_TEST(lines(esc.err) == 1u, esc.err);
  const CommandResult missing =
      run_attograd("generate " + shell_quote((temp_root() / "none").string()) + " --tokens 3");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(lines(missing.err) == 1u, missing.err);
}

BOOST_AUTO_TEST_SUITE_END()
