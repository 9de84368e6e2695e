// The fourth reliability round (issue 40) on the command line: every number an option takes goes through
// one parser per type (empty, NaN, infinities, overflow, fractions for integers and out-of-range values
// refused in one line naming the option, nothing clamped or wrapped); `attograd sae` checks every output
// before training and prints progress only on a terminal, so a failing command prints exactly one line; ids
// the model has beyond its task's vocabulary are valid input and output everywhere, shown as <id N>.
#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "io/printable.h"

namespace fs = std::filesystem;
using testing::run_attograd;
using testing::shell_quote;

namespace {

bool one_printable_line(const std::string& err) {
  return err.size() > 1 && err.back() == '\n' && err.find('\n') == err.size() - 1 &&
         io::is_printable_utf8(err.substr(0, err.size() - 1));
}

// Exit 2 and exactly one printable line on stderr holding `expected`, nothing on stdout.
void expect_refused(const std::string& args, const std::string& expected) {
  const auto r = run_attograd(args);
  BOOST_TEST(r.exit_code == 2, args << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(one_printable_line(r.err), args << " -> " << r.err);
  BOOST_TEST(r.err.find(expected) != std::string::npos, args << " -> " << r.err);
  BOOST_TEST(r.out.empty(), args << " printed " << r.out);
}

std::string fixture_run(const testing::TempDir& dir) {
  const std::string run = dir.file("run");
  if (!fs::exists(run))
    fs::copy(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small", run,
             fs::copy_options::recursive);
  return run;
}

const char* kSaeConfig =
    R"({"steps": 20, "batch_size": 64, "buffer_tokens": 256, "checkpoint_every": 10, "eval_sequences": 8, "d_sae": 24})";

}  // namespace

BOOST_AUTO_TEST_CASE(nan_and_infinities_are_refused_by_every_range) {
  expect_refused("tms --importance nan --json --steps 10",
                 "--importance: expected a finite number, got \"nan\"");
  expect_refused("tms --sparsity nan --json --steps 10", "--sparsity: expected a finite number, got \"nan\"");
  expect_refused("tms --sparsity -inf --json --steps 10", "--sparsity: expected a finite number");
  expect_refused("sae synthetic --p nan --json", "--p: expected a finite number, got \"nan\"");
  expect_refused("sae synthetic --p NaN --json", "--p: expected a finite number, got \"NaN\"");
  expect_refused("gradcheck configs/reverse.json --tolerance nan", "--tolerance: expected a finite number");
  expect_refused("bench configs/reverse.json --peak-gflops inf", "--peak-gflops: expected a finite number");
  expect_refused("tms --importance 1e400 --json", "--importance: expected a finite number, got \"1e400\"");
  expect_refused("tms --importance 2 --json", "--importance: must be >= 0.01 and <= 1, got 2");
}

BOOST_AUTO_TEST_CASE(numbers_are_neither_empty_clamped_wrapped_nor_rounded) {
  testing::TempDir dir;
  const std::string run = fixture_run(dir);
  const std::string gen = "generate " + shell_quote(run) + " --tokens BOS 1 2 ";
  expect_refused(gen + "--temperature ''", "--temperature: expected a number, got nothing");
  expect_refused(gen + "--top-k 9223372036854775808",
                 "--top-k: must be >= 0 and <= 9223372036854775807, got 9223372036854775808");
  expect_refused(gen + "--seed 18446744073709551616",
                 "--seed: must be <= 18446744073709551615, got 18446744073709551616");
  expect_refused(gen + "--seed -1", "--seed: must be >= 0, got -1");
  expect_refused(gen + "--max-new ''", "--max-new: expected an integer, got nothing");
  expect_refused("ablate " + shell_quote(run) + " --mode resample --seed -1", "--seed: must be >= 0, got -1");
  expect_refused("ablate " + shell_quote(run) + " --mode resample --k 1.5",
                 "--k: expected an integer, got \"1.5\"");
  expect_refused("ablate " + shell_quote(run) + " --mode resample --k 0", "--k: must be >= 1, got 0");
  expect_refused("ablate " + shell_quote(run) + " --n 2147483648",
                 "--n: must be >= 1 and <= 2147483647, got 2147483648");
  // Only plain decimal: no hex, no octal reading of a leading 0, no exponent, no sign or space in front.
  expect_refused("tms --n 0x5 --json", "--n: expected an integer, got \"0x5\"");
  expect_refused("tms --steps 1e3 --json", "--steps: expected an integer, got \"1e3\"");
  expect_refused("tms --n +5 --json", "--n: expected an integer, got \"+5\"");
  expect_refused("tms --n ' 5' --json", "--n: expected an integer, got \" 5\"");
  expect_refused("tms --n 1001 --json", "--n: must be >= 2 and <= 1000, got 1001");
  expect_refused("demo --section 8", "--section: must be >= 1 and <= 7, got 8");
  expect_refused(std::string("attend ") + shell_quote(run) + " --tokens 'BOS 1' --layer 99999999999",
                 "--layer: must be <= 2147483647, got 99999999999");
  // "010" is ten, as written (CLI11 alone would read it as octal 8).
  const auto r = run_attograd("tms --n 010 --m 2 --steps 1 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(nlohmann::json::parse(r.out)["W"][0].size() == 10u);
  // The largest seed is a seed like any other.
  BOOST_TEST(run_attograd(gen + "--seed 18446744073709551615 --max-new 1").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(sae_checks_every_output_before_training_and_prints_one_line) {
  testing::TempDir dir;
  const std::string run = fixture_run(dir);
  const std::string config = dir.file("sae.json");
  std::ofstream(config) << kSaeConfig;
  const std::string sae =
      "sae " + shell_quote(run) + " --at blocks.0.mlp.post --config " + shell_quote(config);
  // An --out whose eval.json is a folder, whose features.html is a FIFO or a symbolic link: refused before
  // any training (nothing written there, and no progress line before the error).
  const std::string out = dir.file("out");
  fs::create_directories(out + "/eval.json");
  expect_refused(sae + " --out " + shell_quote(out), "eval.json: is a folder, not a regular file");
  BOOST_TEST(!fs::exists(out + "/checkpoint.safetensors"));
  fs::remove(out + "/eval.json");
  BOOST_TEST_REQUIRE(::mkfifo((out + "/features.html").c_str(), 0644) == 0);
  expect_refused(sae + " --out " + shell_quote(out), "features.html: is a FIFO, not a regular file");
  BOOST_TEST(!fs::exists(out + "/checkpoint.safetensors"));
  fs::remove(out + "/features.html");
  std::ofstream(dir.file("mine.html")) << "mine";
  fs::create_symlink(dir.file("mine.html"), out + "/features.html");
  expect_refused(sae + " --out " + shell_quote(out), "features.html: is a symbolic link, not a regular file");
  BOOST_TEST(testing::read_all(dir.file("mine.html")) == "mine");
  BOOST_TEST(!fs::exists(out + "/checkpoint.safetensors"));
  // Another SAE's malformed eval.json, met when the run's report is rebuilt: refused before training too.
  fs::create_directories(run + "/sae/blocks.0.resid_post");
  std::ofstream(run + "/sae/blocks.0.resid_post/eval.json") << "{\"point\": ";
  expect_refused(sae, "blocks.0.resid_post/eval.json: line 1, column");
  BOOST_TEST(!fs::exists(run + "/sae/blocks.0.mlp.post/checkpoint.safetensors"));
  fs::remove_all(run + "/sae/blocks.0.resid_post");
  // A run that succeeds with stderr not a terminal prints no progress there.
  const auto ok = run_attograd(sae + " --json");
  BOOST_TEST_REQUIRE(ok.exit_code == 0, ok.err);
  BOOST_TEST(ok.err.empty(), ok.err);
  // --progress asks for it anyway.
  const auto shown = run_attograd("sae synthetic --features 8 --dim 4 --sae-features 8 --config " +
                                  shell_quote(config) + " --progress");
  BOOST_TEST_REQUIRE(shown.exit_code == 0, shown.err);
  BOOST_TEST(!shown.err.empty());
}

BOOST_AUTO_TEST_CASE(ids_beyond_the_task_but_inside_the_model_are_valid) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  // reverse's task has 12 tokens; the model gets 40.
  const auto trained = run_attograd(
      "train configs/reverse.json --set train.steps=3 --set model.vocab=40 --set model.d_model=16 "
      "--set model.n_heads=2 --set model.n_layers=1 --set model.d_ff=32 --set train.batch_size=8 "
      "--set train.eval_size=16 --set output.attention_every=0 --out " +
      shell_quote(run));
  BOOST_TEST_REQUIRE(trained.exit_code == 0, trained.err);
  const auto forward = run_attograd("forward " + shell_quote(run) + " --ids '0 35 3' --json");
  BOOST_TEST_REQUIRE(forward.exit_code == 0, forward.err);
  const nlohmann::json f = nlohmann::json::parse(forward.out);
  BOOST_TEST(f["tokens"][1] == "<id 35>");
  BOOST_TEST(f["logits"][0].size() == 40u);
  // patch's default answer and wrong are the model's top predictions, whatever ids they are (a model this
  // little trained may predict the same on both, which patch refuses for its own reason).
  const auto patch =
      run_attograd("patch " + shell_quote(run) + " --clean 'BOS 1 2 SEP' --corrupt 'BOS 3 4 SEP' --json");
  BOOST_TEST((patch.exit_code == 0 || patch.err.find("on both clean and corrupt") != std::string::npos),
             patch.err);
  BOOST_TEST(patch.err.find("outside the vocabulary") == std::string::npos, patch.err);
  const auto lens = run_attograd("lens " + shell_quote(run) + " --ids '0 39 3' --json");
  BOOST_TEST(lens.exit_code == 0, lens.err);
  // An id beyond the model's vocabulary stays refused, naming the model's range.
  expect_refused("forward " + shell_quote(run) + " --ids '0 40 3'", "0..39");
}
