// Head-score formulas on hand-built maps whose scores are known without running the code (perfect
// previous-token, induction and duplicate-token maps, the uniform causal map's closed forms, a task map with
// given ideal keys), pooling over probes, and the duplicate-token score against `detect --pattern duplicate`.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "analysis/head_scores.h"
#include "findings/head_detect.h"

using namespace analysis;
using namespace findings;

namespace {

AttentionWeights zeros(int T) {
  return AttentionWeights(T, std::vector<float>(T, 0.0f));
}

// Each row attends evenly to its visible keys: w[i][j] = 1 / (i + 1) for j <= i.
AttentionWeights uniform_causal(int T) {
  AttentionWeights w = zeros(T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) w[i][j] = 1.0f / (i + 1);
  return w;
}

// Row 0 can only look at itself; every later row puts all its weight on i - 1.
AttentionWeights previous_token_map(int T) {
  AttentionWeights w = zeros(T);
  w[0][0] = 1;
  for (int i = 1; i < T; ++i) w[i][i - 1] = 1;
  return w;
}
}  // namespace

BOOST_AUTO_TEST_CASE(perfect_previous_token_map) {
  const AttentionWeights w = previous_token_map(6);
  BOOST_TEST(previous_token_mass(w).mean() == 1.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(previous_token_mass(w).rows == 5);
  // Only rows 0 (itself) and 1 (its previous token is position 0) touch position 0: 2 of 6 rows.
  BOOST_TEST(first_token_mass(w).mean() == 2.0 / 6.0, boost::test_tools::tolerance(1e-7));
}

BOOST_AUTO_TEST_CASE(uniform_causal_map_closed_forms) {
  const AttentionWeights w = uniform_causal(4);
  // previous: (1/2 + 1/3 + 1/4) / 3 = 13/36; first: (1 + 1/2 + 1/3 + 1/4) / 4 = 25/48.
  BOOST_TEST(previous_token_mass(w).mean() == 13.0 / 36.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(first_token_mass(w).mean() == 25.0 / 48.0, boost::test_tools::tolerance(1e-6));
  // ids 5 6 5 6: row 2 repeats position 0 -> key 1 (1/3); row 3 repeats position 1 -> key 2 (1/4).
  const ScoreSum ind = induction_mass(w, {5, 6, 5, 6});
  BOOST_TEST(ind.rows == 2);
  BOOST_TEST(ind.mean() == 7.0 / 24.0, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(perfect_induction_map_on_repeated_sequence) {
  // BOS then a random sequence twice: 0 | 3 7 2 | 3 7 2. Rows 4, 5, 6 repeat positions 1, 2, 3 and a
  // perfect induction head attends to the token after the earlier occurrence: keys 2, 3, 4.
  const std::vector<int> ids = {0, 3, 7, 2, 3, 7, 2};
  AttentionWeights w = zeros(7);
  for (int i = 0; i < 4; ++i) w[i][0] = 1;  // first half: nothing to copy yet, rest on BOS
  w[4][2] = 1;
  w[5][3] = 1;
  w[6][4] = 1;
  const ScoreSum ind = induction_mass(w, ids);
  BOOST_TEST(ind.rows == 3);
  BOOST_TEST(ind.mean() == 1.0, boost::test_tools::tolerance(1e-12));
  // The same map is not a previous-token head: rows 1..6 put weight on i-1 only at row 1 (key 0).
  BOOST_TEST(previous_token_mass(w).mean() == 1.0 / 6.0, boost::test_tools::tolerance(1e-7));
  // A previous-token head on the same sequence scores 0 on induction (key j+1 is never i-1 here).
  BOOST_TEST(induction_mass(previous_token_map(7), ids).mean() == 0.0);
}

BOOST_AUTO_TEST_CASE(induction_uses_the_most_recent_earlier_occurrence) {
  // ids 1 1 1: row 1 -> j = 0 -> key 1; row 2 -> j = 1 (not 0) -> key 2.
  AttentionWeights w = zeros(3);
  w[0][0] = 1;
  w[1][1] = 1;
  w[2][2] = 1;
  BOOST_TEST(induction_mass(w, {1, 1, 1}).mean() == 1.0);
  AttentionWeights older = zeros(3);
  older[1][1] = 1;
  older[2][1] = 1;  // the position after the older occurrence: not counted
  BOOST_TEST(induction_mass(older, {1, 1, 1}).mean() == 0.5);
  // No repeated token: no counted row, so the score is undefined, not 0.
  BOOST_TEST(std::isnan(induction_mass(w, {1, 2, 3}).mean()));
}

BOOST_AUTO_TEST_CASE(duplicate_token_counts_every_earlier_copy) {
  // Uniform causal map on ids 1 1 1: row 1 has key 0 (1/2); row 2 has keys 0 and 1 (1/3 + 1/3). All
  // earlier copies count, as in TransformerLens's duplicate-token pattern: (1/2 + 2/3) / 2 = 7/12 (the most
  // recent copy alone would give (1/2 + 1/3) / 2 = 5/12).
  const ScoreSum all = duplicate_token_mass(uniform_causal(3), {1, 1, 1});
  BOOST_TEST(all.rows == 2);
  BOOST_TEST(all.mean() == 7.0 / 12.0, boost::test_tools::tolerance(1e-6));
  // ids 5 6 5 6 on the uniform map: row 2 -> key 0 (1/3), row 3 -> key 1 (1/4): (1/3 + 1/4) / 2 = 7/24.
  BOOST_TEST(duplicate_token_mass(uniform_causal(4), {5, 6, 5, 6}).mean() == 7.0 / 24.0,
             boost::test_tools::tolerance(1e-6));
  // The row's own position is never a duplicate: attending to itself scores 0.
  AttentionWeights self = zeros(3);
  for (int i = 0; i < 3; ++i) self[i][i] = 1;
  BOOST_TEST(duplicate_token_mass(self, {1, 1, 1}).mean() == 0.0);
  // No repeated token: undefined, not 0.
  BOOST_TEST(std::isnan(duplicate_token_mass(self, {1, 2, 3}).mean()));
  BOOST_CHECK_THROW(duplicate_token_mass(self, {1, 2}), std::invalid_argument);
  BOOST_CHECK_THROW(duplicate_token_mass(self, {1, -2, 3}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(perfect_duplicate_token_map_on_repeated_sequence) {
  // 0 | 3 7 2 | 3 7 2: rows 4, 5, 6 repeat positions 1, 2, 3; a duplicate-token head looks at the copy.
  const std::vector<int> ids = {0, 3, 7, 2, 3, 7, 2};
  AttentionWeights dup = zeros(7);
  for (int i = 0; i < 4; ++i) dup[i][0] = 1;
  dup[4][1] = 1;
  dup[5][2] = 1;
  dup[6][3] = 1;
  const ScoreSum d = duplicate_token_mass(dup, ids);
  BOOST_TEST(d.rows == 3);
  BOOST_TEST(d.mean() == 1.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(induction_mass(dup, ids).mean() == 0.0);  // the copy itself, not the token after it
  // An induction head and a previous-token head on the same sequence are not duplicate-token heads.
  AttentionWeights ind = dup;
  ind[4][1] = ind[5][2] = ind[6][3] = 0;
  ind[4][2] = ind[5][3] = ind[6][4] = 1;
  BOOST_TEST(duplicate_token_mass(ind, ids).mean() == 0.0);
  BOOST_TEST(duplicate_token_mass(previous_token_map(7), ids).mean() == 0.0);
}

BOOST_AUTO_TEST_CASE(duplicate_token_agrees_with_detect_duplicate) {
  // Same pattern D as `detect --pattern duplicate`; detect's mul score divides by every row's mass (T rows
  // of a causal map), the score by the counted rows only: score * rows == detect * T.
  const std::vector<int> ids = {4, 1, 4, 2, 1, 4};
  const AttentionWeights w = uniform_causal(6);
  const ScoreSum s = duplicate_token_mass(w, ids);
  const double detect =
      detection_score(w, detection_pattern(detection_rule("duplicate"), ids), DetectMode::mul);
  BOOST_TEST(s.rows == 3);  // rows 2, 4, 5
  BOOST_TEST(s.sum == detect * 6.0, boost::test_tools::tolerance(1e-6));
  // Row 2: 1/3 (key 0); row 4: 1/5 (key 1); row 5: 2/6 (keys 0, 2).
  BOOST_TEST(s.mean() == (1.0 / 3 + 1.0 / 5 + 2.0 / 6) / 3, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(task_score_with_given_ideal_keys) {
  AttentionWeights w = zeros(4);
  w[2][0] = 0.7f;
  w[2][2] = 0.3f;
  w[3][0] = 0.3f;
  w[3][1] = 0.2f;
  w[3][3] = 0.5f;
  // Rows 0 and 1 are not answer rows; row 2's ideal key is 0 (0.7); row 3's are 1 and 0 (0.5).
  const ScoreSum s = task_mass(w, {{}, {}, {0}, {1, 0}});
  BOOST_TEST(s.rows == 2);
  BOOST_TEST(s.mean() == 0.6, boost::test_tools::tolerance(1e-6));
  // A key listed twice counts once.
  BOOST_TEST(task_mass(w, {{}, {}, {}, {1, 1}}).mean() == 0.2, boost::test_tools::tolerance(1e-6));
  BOOST_CHECK_THROW(task_mass(w, {{}, {}, {4}, {}}), std::invalid_argument);
  BOOST_CHECK_THROW(task_mass(w, {{}, {}}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(scores_pool_rows_over_probes) {
  // Probe A (T=2) has one previous-token row at weight 1; probe B (T=4) three rows at weight 0.
  // Pooled: (1 + 0 + 0 + 0) / 4 = 0.25, not the mean of per-probe means (0.5).
  Probe a{{0, 1}, {"a", "b"}, {{0, 0, previous_token_map(2)}}};
  AttentionWeights on_self = zeros(4);
  for (int i = 0; i < 4; ++i) on_self[i][i] = 1;
  Probe b{{0, 1, 2, 3}, {"a", "b", "c", "d"}, {{0, 0, on_self}}};
  const auto scores = compute_head_scores({a, b}, {}, {});
  BOOST_TEST_REQUIRE(scores.size() == 1u);
  BOOST_TEST(scores[0].previous_token == 0.25, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(std::isnan(scores[0].task));             // no ideal keys given
  BOOST_TEST(std::isnan(scores[0].induction));        // no repeated probes given
  BOOST_TEST(std::isnan(scores[0].duplicate_token));  // likewise
  // first token: rows 0,1 of A give 1, 1; B gives 1, 0, 0, 0 -> 3 / 6.
  BOOST_TEST(scores[0].first_token == 0.5, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(compute_head_scores_covers_every_head_in_order) {
  const std::vector<int> ids = {0, 3, 7, 3, 7};
  Probe p{ids, {"BOS", "3", "7", "3", "7"}, {}};
  p.maps.push_back({1, 0, uniform_causal(5)});
  p.maps.push_back({0, 1, previous_token_map(5)});
  p.maps.push_back({0, 0, uniform_causal(5)});
  std::vector<std::vector<int>> keys(5);
  keys[4] = {0};
  const auto scores = compute_head_scores({p}, {keys}, {p});
  BOOST_TEST_REQUIRE(scores.size() == 3u);
  BOOST_TEST((scores[0].layer == 0 && scores[0].head == 0));
  BOOST_TEST((scores[1].layer == 0 && scores[1].head == 1));
  BOOST_TEST((scores[2].layer == 1 && scores[2].head == 0));
  BOOST_TEST(scores[1].previous_token == 1.0);
  BOOST_TEST(scores[0].task == 0.2, boost::test_tools::tolerance(1e-6));  // row 4 of uniform: 1/5 on key 0
  // previous-token head on 0 3 7 3 7: rows 3, 4 want keys 2, 3 but look at 2, 3 -> both 1.
  BOOST_TEST(scores[1].induction == 1.0);
  // ... and their copies are at 1, 2: duplicate 0. Uniform: row 3 -> 1/4 (key 1), row 4 -> 1/5 (key 2).
  BOOST_TEST(scores[1].duplicate_token == 0.0);
  BOOST_TEST(scores[0].duplicate_token == (0.25 + 0.2) / 2, boost::test_tools::tolerance(1e-6));
}
