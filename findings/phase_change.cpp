#include "findings/phase_change.h"

#include <algorithm>
#include <cmath>

namespace findings {

Curve best_head_curve(const std::vector<HeadScoresFile>& history, double HeadScores::*field) {
  Curve curve;
  for (const HeadScoresFile& f : history) {
    double best = -INFINITY;
    for (const HeadScores& h : f.heads)
      if (std::isfinite(h.*field)) best = std::max(best, h.*field);
    if (std::isfinite(best)) curve.push_back({double(f.step), best});
  }
  return curve;
}

std::optional<double> first_reaching(const Curve& curve, double threshold) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].second < threshold) continue;
    if (i == 0) return curve[0].first;
    const auto [s0, v0] = curve[i - 1];
    const auto [s1, v1] = curve[i];
    return s0 + (threshold - v0) / (v1 - v0) * (s1 - s0);  // v0 < threshold <= v1, so v1 > v0
  }
  return std::nullopt;
}

std::optional<double> fastest_fall(const Curve& curve) {
  std::optional<double> at;
  double steepest = 0;
  for (size_t i = 1; i < curve.size(); ++i) {
    const double ds = curve[i].first - curve[i - 1].first;
    if (!(ds > 0)) continue;
    const double rate = (curve[i - 1].second - curve[i].second) / ds;
    if (rate > steepest) steepest = rate, at = (curve[i - 1].first + curve[i].first) / 2;
  }
  return at;
}

PhaseChange phase_change(const std::vector<HeadScoresFile>& history, const Curve& eval_loss) {
  PhaseChange p;
  p.induction = first_reaching(best_head_curve(history, &HeadScores::induction), 0.5);
  p.task = first_reaching(best_head_curve(history, &HeadScores::task), 0.5);
  p.previous_token = first_reaching(best_head_curve(history, &HeadScores::previous_token), 0.5);
  p.eval_loss_fall = fastest_fall(eval_loss);
  return p;
}

}  // namespace findings
