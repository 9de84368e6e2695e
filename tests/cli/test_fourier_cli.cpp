// `attograd fourier` and the progress measures end to end: a small modular-addition run (p 23) trained with
// output.measures_every writes measures.jsonl and fourier/, a resumed run's measures equal an uninterrupted
// run's, `fourier --json` has the documented keys, and a run that is not modular addition is one error line.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/run_command.h"
#include "common/temp_dir.h"

using testing::run_attograd;
using testing::shell_quote;

namespace {

// A p 23 grokking-style model, small and brief: 60 full-batch steps, measured every 20.
std::string train_args(const std::string& out, int steps) {
  return "train tests/fixtures/grokking_small_config.json --out " + shell_quote(out) +
         " --set train.steps=" + std::to_string(steps) +
         " --set output.measures_every=20 --set train.eval_every=20 --set train.log_every=20"
         " --set output.checkpoint_every=20";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_modular_addition_run_writes_its_measures_and_fourier_files) {
  testing::TempDir dir;
  const std::string run = dir.dir.string() + "/run";
  const auto trained = run_attograd(train_args(run, 60));
  BOOST_TEST_REQUIRE(trained.exit_code == 0, trained.err);
  BOOST_TEST(trained.out.find("Fourier analysis at step 60") != std::string::npos, trained.out);

  std::ifstream in(run + "/measures.jsonl");
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    steps.push_back(j.at("step").get<int64_t>());
    for (const char* key : {"train_loss", "train_acc", "test_loss", "test_acc", "restricted_loss",
                            "excluded_loss", "gini_embed", "gini_neuron_logit", "weight_norm_sq"})
      BOOST_TEST(j.at(key).is_number(), key);
    BOOST_TEST(j.at("key_frequencies").is_array());
  }
  BOOST_TEST((steps == std::vector<int64_t>{0, 20, 40, 60}));
  for (const char* f : {"fourier.json", "spectra.svg", "neurons.svg", "logits.svg", "measures.svg"})
    BOOST_TEST(std::filesystem::exists(run + "/fourier/" + f), f);

  const auto fourier = run_attograd("fourier " + shell_quote(run) + " --json");
  BOOST_TEST_REQUIRE(fourier.exit_code == 0, fourier.err);
  const auto j = nlohmann::json::parse(fourier.out);
  BOOST_TEST(j.at("p").get<int>() == 23);
  for (const char* key : {"embed_norms", "unembed_norms", "neuron_logit_norms"})
    BOOST_TEST(j.at(key).size() == 11u, key);  // k = 1..(23-1)/2
  BOOST_TEST(j.at("neurons").size() == 64u);
  for (const char* key :
       {"key_frequencies", "train_loss", "test_loss", "train_acc", "test_acc", "restricted_loss",
        "excluded_loss", "gini_embed", "gini_neuron_logit", "weight_norm_sq"})
    BOOST_TEST(j.contains(key), key);
  const auto text = run_attograd("fourier " + shell_quote(run));
  BOOST_TEST(text.exit_code == 0);
  BOOST_TEST(text.out.find("key frequencies") != std::string::npos, text.out);
}

BOOST_AUTO_TEST_CASE(a_resumed_run_measures_what_an_uninterrupted_run_measures) {
  testing::TempDir dir;
  const std::string whole = dir.dir.string() + "/whole", split = dir.dir.string() + "/split";
  BOOST_TEST_REQUIRE(run_attograd(train_args(whole, 60)).exit_code == 0);
  BOOST_TEST_REQUIRE(run_attograd(train_args(split, 40)).exit_code == 0);
  const auto resumed = run_attograd("train --resume " + shell_quote(split) + " --set train.steps=60");
  BOOST_TEST_REQUIRE(resumed.exit_code == 0, resumed.err);
  BOOST_TEST(testing::read_all(whole + "/measures.jsonl") == testing::read_all(split + "/measures.jsonl"));
}

BOOST_AUTO_TEST_CASE(fourier_refuses_a_run_that_is_not_modular_addition_in_one_line) {
  testing::TempDir dir;
  const std::string run = dir.dir.string() + "/reverse";
  BOOST_TEST_REQUIRE(
      run_attograd("train configs/reverse.json --out " + shell_quote(run) +
                   " --set train.steps=2 --set output.checkpoint_every=0 --set output.attention_every=0")
          .exit_code == 0);
  const auto r = run_attograd("fourier " + shell_quote(run));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("modadd") != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  const auto config = run_attograd("train configs/reverse.json --out " +
                                   shell_quote(dir.dir.string() + "/x") + " --set output.measures_every=10");
  BOOST_TEST(config.exit_code == 2);
  BOOST_TEST(config.err.find("/output/measures_every") != std::string::npos, config.err);
}
