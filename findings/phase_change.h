// When a run's attention patterns formed, from its scores at each attention dump (RUN/scores/*.json) and
// its held-out losses: the step at which the best head's score of a kind first reaches a threshold,
// interpolated linearly between the two dumps around the crossing, and the step at which the held-out loss
// falls fastest (the midpoint of the steepest interval between two evaluations). Pure numbers, so the run
// report, scores.json and the sweep summary all say the same.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "findings/head_scores.h"

namespace findings {

using Curve = std::vector<std::pair<double, double>>;  // (step, value), in step order

// The highest score of the kind over all heads at each step of the history (steps with no defined score
// are left out).
Curve best_head_curve(const std::vector<HeadScoresFile>& history, double HeadScores::*field);

// The first step at which the curve reaches `threshold`: the first point's step when it starts there,
// otherwise interpolated between the last point below and the first at or above; nullopt if never.
std::optional<double> first_reaching(const Curve& curve, double threshold);

// The midpoint of the interval with the steepest fall of the value per step; nullopt with fewer than two
// points or when the value never falls.
std::optional<double> fastest_fall(const Curve& curve);

// Induction, task and previous-token at 0.5, and the held-out loss's fastest fall.
PhaseChange phase_change(const std::vector<HeadScoresFile>& history, const Curve& eval_loss);

}  // namespace findings
