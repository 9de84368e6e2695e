// Phase-change steps: the first crossing of 0.5 by the best head, interpolated between dumps; the
// held-out loss's steepest fall; and scores.json keeping them through a write and a read.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "common/temp_dir.h"
#include "findings/phase_change.h"

using namespace findings;

namespace {

HeadScoresFile at(int64_t step, std::vector<std::pair<double, double>> induction_by_head) {
  HeadScoresFile f;
  f.step = step;
  int head = 0;
  for (const auto& [ind, prev] : induction_by_head) {
    HeadScores h;
    h.layer = 1;
    h.head = head++;
    h.induction = ind;
    h.previous_token = prev;
    h.task = NAN;
    f.heads.push_back(h);
  }
  return f;
}

}  // namespace

BOOST_AUTO_TEST_CASE(best_head_crossing_is_interpolated_between_dumps) {
  // Head 0 rises 0.1 -> 0.3 -> 0.7; head 1 stays at 0.2 then jumps to 0.45: the best is max per step.
  const std::vector<HeadScoresFile> history = {
      at(0, {{0.1, 0.9}, {0.2, 0.0}}), at(100, {{0.3, 0.2}, {0.2, 0.0}}), at(200, {{0.7, 0.1}, {0.45, 0.0}})};
  const Curve best = best_head_curve(history, &HeadScores::induction);
  BOOST_REQUIRE(best.size() == 3u);
  BOOST_TEST(best[0].second == 0.2);
  BOOST_TEST(best[2].second == 0.7);
  // 0.3 at 100, 0.7 at 200: 0.5 is halfway.
  BOOST_TEST(*first_reaching(best, 0.5) == 150.0);
  // Already at 0.9 at the first dump: that dump's step, not earlier.
  BOOST_TEST(*first_reaching(best_head_curve(history, &HeadScores::previous_token), 0.5) == 0.0);
  BOOST_TEST(!first_reaching(best, 0.75).has_value());
  // Undefined scores (NaN) make no point at all.
  BOOST_TEST(best_head_curve(history, &HeadScores::task).empty());
  const PhaseChange p = phase_change(history, {});
  BOOST_TEST(*p.induction == 150.0);
  BOOST_TEST(!p.task.has_value());
  BOOST_TEST(!p.eval_loss_fall.has_value());
}

BOOST_AUTO_TEST_CASE(fastest_fall_is_the_midpoint_of_the_steepest_interval) {
  // Falls of 0.1 per 100 steps, then 1.0 per 100 (steepest), then a rise.
  BOOST_TEST(*fastest_fall({{0, 3.0}, {100, 2.9}, {200, 1.9}, {300, 1.8}, {400, 2.5}}) == 150.0);
  // Per step, not per interval: 0.5 over 50 steps beats 0.8 over 200.
  BOOST_TEST(*fastest_fall({{0, 3.0}, {200, 2.2}, {250, 1.7}}) == 225.0);
  BOOST_TEST(!fastest_fall({{0, 1.0}, {100, 1.2}}).has_value());
  BOOST_TEST(!fastest_fall({{0, 1.0}}).has_value());
}

BOOST_AUTO_TEST_CASE(scores_json_keeps_phase_change_and_wall_time) {
  testing::TempDir dir;
  HeadScoresFile f = at(300, {{0.8, 0.1}});
  f.phase_change = PhaseChange{125.5, std::nullopt, 0.0, 75.0};
  f.wall_seconds = 12.25;
  write_head_scores(dir.file("scores.json"), f);
  const HeadScoresFile back = read_head_scores(dir.file("scores.json"));
  BOOST_REQUIRE(back.phase_change.has_value());
  BOOST_TEST(*back.phase_change->induction == 125.5);
  BOOST_TEST(!back.phase_change->task.has_value());
  BOOST_TEST(*back.phase_change->previous_token == 0.0);
  BOOST_TEST(*back.phase_change->eval_loss_fall == 75.0);
  BOOST_TEST(*back.wall_seconds == 12.25);
  // A file without them (an older run) reads with neither.
  write_head_scores(dir.file("plain.json"), at(300, {{0.8, 0.1}}));
  BOOST_TEST(!read_head_scores(dir.file("plain.json")).phase_change.has_value());
  BOOST_TEST(!read_head_scores(dir.file("plain.json")).wall_seconds.has_value());
}
