// The user's own data from the command line: a JSONL task none of the built-in kinds has (the most frequent
// letter of a varying-length list, configs/most_frequent.json) trains to >= 99% held-out, and eval, forward,
// attend and patch read that run with its own token names; a bad line is one error naming the config, the
// file, the line and the field, exit 2; modadd with a train fraction and full batches records its split.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "cli/run_command.h"
#include "common/temp_dir.h"

using testing::run_attograd;
using testing::shell_quote;

BOOST_AUTO_TEST_CASE(a_sequence_file_trains_and_the_study_tools_read_it_by_its_token_names) {
  testing::TempDir dir;
  const std::string run = dir.file("mf");
  // 500 steps: held-out exact match reaches 100% by then on this config (3000 steps in the shipped one).
  const auto trained = run_attograd(
      "train configs/most_frequent.json --set train.steps=500 --set "
      "output.attention_every=0 --out " +
      shell_quote(run));
  BOOST_REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);

  const auto eval = run_attograd("eval " + shell_quote(run) + " --json");
  BOOST_REQUIRE(eval.exit_code == 0);
  const auto held = nlohmann::json::parse(eval.out);
  BOOST_TEST(held["eval_acc"].get<double>() >= 0.99);
  BOOST_TEST(held["n"] == 512);
  const auto train_eval = run_attograd("eval " + shell_quote(run) + " --split train --json");
  BOOST_REQUIRE(train_eval.exit_code == 0);
  BOOST_TEST(nlohmann::json::parse(train_eval.out)["n"] == 3200);  // 80% of 4000 lines

  const auto split = nlohmann::json::parse(testing::read_all(run + "/split.json"));
  BOOST_TEST(split["id"] == "line");
  BOOST_TEST(split["train"].size() == 3200u);
  BOOST_TEST(split["heldout"].size() == 800u);

  // The answer to "BOS a c c b c a SEP" is c: the model's top prediction at SEP.
  const auto forward = run_attograd("forward " + shell_quote(run) + " --tokens 'BOS a c c b c a SEP' --json");
  BOOST_REQUIRE_MESSAGE(forward.exit_code == 0, forward.err);
  const auto f = nlohmann::json::parse(forward.out);
  BOOST_TEST(f.dump().find("\"c\"") != std::string::npos);
  const auto unknown = run_attograd("forward " + shell_quote(run) + " --tokens 'BOS a q SEP'");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(unknown.err.find("'q'") != std::string::npos, unknown.err);

  const auto attend = run_attograd("attend " + shell_quote(run) + " --tokens 'BOS a c c b c a SEP'");
  BOOST_TEST(attend.exit_code == 0, attend.err);
  BOOST_TEST(attend.out.find("SEP") != std::string::npos);

  const auto patch = run_attograd("patch " + shell_quote(run) +
                                  " --clean 'BOS a c c b c a SEP' --corrupt 'BOS a b b b c a SEP' --answer c "
                                  "--wrong b --json");
  BOOST_REQUIRE_MESSAGE(patch.exit_code == 0, patch.err);
  const auto p = nlohmann::json::parse(patch.out);
  BOOST_TEST(p.contains("resid_pre"));

  // The head score that needs an ideal pattern is undefined for a sequence file.
  const auto scores = nlohmann::json::parse(testing::read_all(run + "/scores.json"));
  for (const auto& head : scores["heads"]) BOOST_TEST(head["task"].is_null());
}

BOOST_AUTO_TEST_CASE(a_bad_line_is_one_error_naming_the_config_the_file_the_line_and_the_field) {
  testing::TempDir dir;
  const std::string data = dir.file("bad.jsonl");
  std::ofstream(data) << "{\"tokens\": [\"a\", \"b\"]}\n{\"tokens\": [\"a\", \"b\"], \"scored\": [5]}\n";
  const auto r = run_attograd("train configs/most_frequent.json --set task.path=" + shell_quote(data) +
                              " --out " + shell_quote(dir.file("run")));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err ==
             "attograd train: --set task.path=" + data + ": /task/path: " + data +
                 ":2: /scored/0: 5 is outside 1..1 (the indices of the tokens to predict; token 0 has "
                 "nothing before it)\n");
}

BOOST_AUTO_TEST_CASE(modadd_with_a_train_fraction_and_full_batches_records_its_split) {
  testing::TempDir dir;
  const std::string run = dir.file("modadd");
  const auto r = run_attograd(
      "train configs/modadd.json --set task.train_fraction=0.3 --set train.batch_size=0 "
      "--set train.steps=4 --set output.attention_every=0 --out " +
      shell_quote(run));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto split = nlohmann::json::parse(testing::read_all(run + "/split.json"));
  BOOST_TEST(split["id"] == "index");
  BOOST_TEST(split["train"].size() == 159u);
  BOOST_TEST(split["heldout"].size() == 370u);
  const auto eval = nlohmann::json::parse(run_attograd("eval " + shell_quote(run) + " --json").out);
  BOOST_TEST(eval["n"] == 370);  // every held-out pair
  const auto stream = run_attograd("eval runs/does-not-matter --split train");
  BOOST_TEST(stream.exit_code == 2);
}
