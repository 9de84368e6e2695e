// Head detectors (findings/head_detect.h): the rules' patterns on a hand-made input, both modes on maps
// whose scores are known (a perfect previous-token map scores 1, a uniform map less), a head's score is the
// mean over inputs, rule files are read and checked with one-line errors.
#include <boost/test/unit_test.hpp>
#include <fstream>

#include "common/temp_dir.h"
#include "findings/head_detect.h"

namespace {

using Pattern = std::vector<std::vector<double>>;

// A causal map with all of row i's weight on key f(i).
findings::AttentionWeights one_hot(size_t T, int (*f)(int)) {
  findings::AttentionWeights w(T, std::vector<float>(T, 0.0f));
  for (size_t i = 0; i < T; ++i) w[i][static_cast<size_t>(f(static_cast<int>(i)))] = 1.0f;
  return w;
}

findings::DetectionRule named(const std::string& name, int offset = 1) {
  findings::DetectionRule r;
  r.rule = name;
  r.offset = offset;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rule_patterns_on_a_repeated_input) {
  // ids: BOS a b c a b  (positions 0..5); a repeats at 4, b at 5.
  const std::vector<int> ids = {0, 7, 8, 9, 7, 8};
  const Pattern dup = findings::detection_pattern(named("duplicate"), ids);
  BOOST_TEST(dup[4][1] == 1.0);  // the second a looks at the first
  BOOST_TEST(dup[5][2] == 1.0);
  BOOST_TEST(dup[4][4] == 0.0);  // never itself
  const Pattern ind = findings::detection_pattern(named("induction"), ids);
  BOOST_TEST(ind[4][2] == 1.0);  // the second a looks at the token after the first a
  BOOST_TEST(ind[5][3] == 1.0);
  BOOST_TEST(ind[3][1] == 0.0);
  const Pattern prev = findings::detection_pattern(named("previous"), ids);
  const Pattern off = findings::detection_pattern(named("offset", 1), ids);
  BOOST_TEST((prev == off));
  BOOST_TEST(prev[0][0] == 0.0);
  BOOST_TEST(prev[3][2] == 1.0);
  const Pattern first = findings::detection_pattern(named("first"), ids);
  for (size_t i = 0; i < ids.size(); ++i) BOOST_TEST(first[i][0] == 1.0);
  for (const Pattern& p : {dup, ind, prev, first})  // lower-triangular
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t j = i + 1; j < ids.size(); ++j) BOOST_TEST(p[i][j] == 0.0);
}

BOOST_AUTO_TEST_CASE(scores_in_both_modes) {
  const size_t T = 6;
  const std::vector<int> ids = {0, 1, 2, 3, 4, 5};
  const Pattern prev = findings::detection_pattern(named("previous"), ids);
  // Row 0 can only look at itself; every other row at its previous token.
  const findings::AttentionWeights perfect = one_hot(T, [](int i) { return i > 0 ? i - 1 : 0; });
  BOOST_TEST(findings::detection_score(perfect, prev, findings::DetectMode::mul) == 5.0 / 6.0,
             boost::test_tools::tolerance(1e-12));
  // abs: row 0 differs by 1 (weight 1 on key 0, pattern 0): 1 - (1 / 36) * 6.
  BOOST_TEST(findings::detection_score(perfect, prev, findings::DetectMode::abs) == 1.0 - 1.0 / 6.0,
             boost::test_tools::tolerance(1e-12));
  const findings::AttentionWeights self = one_hot(T, [](int i) { return i; });
  BOOST_TEST(findings::detection_score(self, prev, findings::DetectMode::mul) == 0.0);
  // Two probes, one perfect and one attending to itself: the head's score is the mean.
  findings::Probe a{ids, {}, {{1, 2, perfect}}}, b{ids, {}, {{1, 2, self}}};
  const auto heads = findings::detect_heads({a, b}, named("previous"), findings::DetectMode::mul);
  BOOST_TEST_REQUIRE(heads.size() == 1u);
  BOOST_TEST(heads[0].layer == 1);
  BOOST_TEST(heads[0].score == 5.0 / 12.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(rule_files_and_their_errors) {
  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  const findings::DetectionRule m =
      findings::detection_rule(write("m.json", "{\"pattern\": [[1,0],[0.5,0.5]]}"));
  BOOST_TEST(m.rule == "matrix");
  BOOST_TEST(findings::detection_pattern(m, {0, 1})[1][0] == 0.5);
  BOOST_CHECK_THROW(findings::detection_pattern(m, {0, 1, 2}), std::invalid_argument);  // T mismatch
  BOOST_TEST(findings::detection_rule(write("o.json", "{\"offset\": 2}")).offset == 2);
  BOOST_TEST(findings::detection_rule(write("r.json", "{\"rule\": \"induction\"}")).rule == "induction");
  BOOST_CHECK_THROW(findings::detection_rule("sideways"), std::invalid_argument);
  for (const std::string& bad : {std::string("{\"pattern\": [[1,0],[0]]}"), std::string("{\"offset\": -1}"),
                                 std::string("{\"rule\": \"x\"}"), std::string("{}"), std::string("[1]")}) {
    try {
      findings::detection_rule(write("bad.json", bad));
      BOOST_FAIL("expected an error for " << bad);
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find("bad.json") != std::string::npos, what);
      BOOST_TEST(what.find('\n') == std::string::npos, what);
    }
  }
}
