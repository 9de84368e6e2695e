// Axis ticks and the categorical palette (see chart_scale.h).
#include "findings/chart_scale.h"

#include <algorithm>
#include <cmath>

namespace findings {

std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi, double* lo_out, double* hi_out) {
  if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi)) {
    if (lo_out) *lo_out = 0.1;
    if (hi_out) *hi_out = 10;
    return {1};
  }
  const int k0 = int(std::floor(std::log10(lo) + 1e-9)), k1 = int(std::ceil(std::log10(hi) - 1e-9));
  const int top = std::max(k1, k0 + 1);
  if (lo_out) *lo_out = std::pow(10.0, k0);
  if (hi_out) *hi_out = std::pow(10.0, top);
  std::vector<double> ticks;
  for (int k = k0; k <= top; ++k) {
    ticks.push_back(std::pow(10.0, k));
    if (top - k0 < 3 && k < top)
      for (double m : {2.0, 5.0}) ticks.push_back(m * std::pow(10.0, k));
  }
  std::sort(ticks.begin(), ticks.end());
  return ticks;
}

const char* category_colour(size_t k) {
  static const char* const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return palette[k % 10];
}

}  // namespace findings
