// Timing statistics for the benchmarks (attograd bench, bench/): how long something takes, summarised over
// repeated runs as the median (the figure reported: one slow run on a shared machine does not move it),
// the minimum (what the code can do when nothing interferes) and the spread (how far the runs disagree).
// Also the median of any sample, for the demo's statistics.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace ag {

using TimingClock = std::chrono::steady_clock;

// Seconds from `start` until now.
inline double seconds_since(TimingClock::time_point start) {
  return std::chrono::duration<double>(TimingClock::now() - start).count();
}

// The median of `v`: the middle value, or the mean of the two middle ones for an even count.
inline double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median: no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct TimingStats {
  double median = 0;
  double min = 0;
  double spread = 0;  // (max - min) / median: 0.1 means the runs lie within 10% of the median's size
  size_t runs = 0;
};

inline TimingStats timing_stats(const std::vector<double>& seconds) {
  if (seconds.empty()) throw std::invalid_argument("timing_stats: no runs");
  const auto [lo, hi] = std::minmax_element(seconds.begin(), seconds.end());
  TimingStats s;
  s.median = median(seconds);
  s.min = *lo;
  s.spread = s.median > 0 ? (*hi - *lo) / s.median : 0;
  s.runs = seconds.size();
  return s;
}

// Runs `f` `warmup` times untimed (caches, page faults, a core's clock coming up), then `runs` times
// timed; returns each timed run's seconds.
template <typename F>
std::vector<double> time_runs(int warmup, int runs, F&& f) {
  for (int r = 0; r < warmup; ++r) f();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(std::max(runs, 0)));
  for (int r = 0; r < runs; ++r) {
    const auto start = TimingClock::now();
    f();
    seconds.push_back(seconds_since(start));
  }
  return seconds;
}

}  // namespace ag
