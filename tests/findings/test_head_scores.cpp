// The scores.json round trip (including a file written before the duplicate-token score) and its errors,
// and the score table (the formulas: tests/analysis/test_head_scores.cpp).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <string>

#include "findings/head_scores.h"
#include "io/atomic_file.h"

using namespace findings;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attograd_test_scores_" + name)).string();
}

}  // namespace

BOOST_AUTO_TEST_CASE(scores_json_round_trip) {
  HeadScoresFile f;
  f.step = 3000;
  HeadScores h0;
  h0.layer = 0, h0.head = 1, h0.task = 0.125, h0.previous_token = 0.9, h0.induction = std::nan(""),
  h0.first_token = 0.01, h0.duplicate_token = std::nan("");
  HeadScores h1 = h0;
  h1.layer = 1, h1.head = 0, h1.induction = 0.75, h1.duplicate_token = 0.375;
  h1.ablation = AblationResult{0.25, 0.5, 1.5, std::nullopt};
  f.heads = {h0, h1};
  const std::string path = temp_path("round_trip.json");
  write_head_scores(path, f);
  const nlohmann::json raw = nlohmann::json::parse(io::read_text_file(path));
  BOOST_TEST(raw["heads"][0]["induction"].is_null());  // NaN is written as null
  BOOST_TEST(raw["heads"][0]["duplicate_token"].is_null());
  BOOST_TEST(raw["heads"][1]["duplicate_token"] == 0.375);
  BOOST_TEST(!raw["heads"][0].contains("ablation"));  // ablation only once measured
  BOOST_TEST(raw["heads"][1]["ablation"]["zero_acc"] == 0.25);
  const HeadScoresFile g = read_head_scores(path);
  BOOST_TEST(g.step == 3000);
  BOOST_TEST_REQUIRE(g.heads.size() == 2u);
  BOOST_TEST(g.heads[0].layer == 0);
  BOOST_TEST(g.heads[0].head == 1);
  BOOST_TEST(g.heads[0].task == 0.125);
  BOOST_TEST(g.heads[0].previous_token == 0.9);
  BOOST_TEST(std::isnan(g.heads[0].induction));
  BOOST_TEST(std::isnan(g.heads[0].duplicate_token));
  BOOST_TEST(g.heads[1].duplicate_token == 0.375);
  BOOST_TEST(!g.heads[0].ablation.has_value());
  BOOST_TEST_REQUIRE(g.heads[1].ablation.has_value());
  BOOST_TEST(g.heads[1].ablation->zero_acc == 0.25);
  BOOST_TEST(g.heads[1].ablation->mean_acc == 0.5);
  BOOST_TEST(g.heads[1].ablation->zero_loss.value_or(-1) == 1.5);
  BOOST_TEST(!g.heads[1].ablation->mean_loss.has_value());
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(scores_json_from_before_the_duplicate_token_score) {
  // A scores.json written before "duplicate_token" existed still reads; the score is undefined, and it is
  // written back as null.
  const nlohmann::json old = nlohmann::json::parse(
      R"({"step": 7, "heads": [{"layer": 0, "head": 0, "task": null, "previous_token": 0.5,
          "induction": 0.25, "first_token": 0.125}]})");
  const HeadScoresFile f = head_scores_from_json(old, "old/scores.json");
  BOOST_TEST_REQUIRE(f.heads.size() == 1u);
  BOOST_TEST(f.heads[0].induction == 0.25);
  BOOST_TEST(std::isnan(f.heads[0].duplicate_token));
  BOOST_TEST(head_scores_to_json(f)["heads"][0]["duplicate_token"].is_null());
  BOOST_TEST(head_scores_table(f.heads).find("dup_tok") != std::string::npos);
  // Present but not a number: an error naming the pointer.
  nlohmann::json bad = old;
  bad["heads"][0]["duplicate_token"] = "high";
  try {
    head_scores_from_json(bad, "RUN/scores.json");
    BOOST_FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("RUN/scores.json: /heads/0/duplicate_token: expected a number") ==
               0u);
  }
}

BOOST_AUTO_TEST_CASE(scores_json_errors_name_file_and_pointer) {
  const nlohmann::json bad = nlohmann::json::parse(
      R"({"step": 5, "heads": [{"layer": 0, "head": 0, "task": 1, "previous_token": 0,
          "induction": "high", "first_token": 0}]})");
  try {
    head_scores_from_json(bad, "RUN/scores.json");
    BOOST_FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("RUN/scores.json: /heads/0/induction: expected a number") == 0u, msg);
    BOOST_TEST(msg.find('\n') == std::string::npos);
  }
  const nlohmann::json missing = nlohmann::json::parse(R"({"step": 5, "heads": [{"layer": 0, "head": 0}]})");
  BOOST_CHECK_THROW(head_scores_from_json(missing, "s.json"), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(table_lists_every_head_and_marks_the_top) {
  HeadScores a, b;
  a.layer = 0, a.head = 0, a.task = 0.1, a.previous_token = 0.95, a.induction = 0.0, a.first_token = 0.2;
  a.duplicate_token = 0.625;
  b.layer = 1, b.head = 0, b.task = 0.92, b.previous_token = 0.05, b.induction = std::nan(""),
  b.first_token = 0.1;
  b.ablation = AblationResult{0.3, 0.4, std::nullopt, std::nullopt};
  const std::string t = head_scores_table({a, b});
  BOOST_TEST(t.find("prev_tok") != std::string::npos);
  BOOST_TEST(t.find("zero_acc") != std::string::npos);
  BOOST_TEST(t.find("dup_tok") != std::string::npos);
  BOOST_TEST(t.find("0.625*") != std::string::npos);  // the only (so highest) duplicate-token score
  BOOST_TEST(t.find("0.950*") != std::string::npos);  // highest previous-token score
  BOOST_TEST(t.find("0.920*") != std::string::npos);  // highest task score
  BOOST_TEST(t.find("0.300*") != std::string::npos);  // lowest accuracy when zeroed
  BOOST_TEST(t.find("zero_loss") == std::string::npos);
}
