// attograd bench as a library call: times training steps (or forward passes) of a config's model and
// reports tokens/s, step times, memory and the MFU against this machine's FMA peak.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/bench_view.h"

namespace runner {

struct BenchRequest {
  std::string config;             // the config file
  std::vector<std::string> sets;  // overrides, key.path=value
  int steps = 20;                 // timed steps
  int warmup = 3;                 // untimed warm-up steps; unless 0, they last at least 1 s
  int threads = 0;                // 0 = the config's train.threads
  double peak_gflops = 0;         // the machine's peak for mfu; 0 = measured
  bool forward = false;           // forward passes without gradients instead of training steps
};

// Told after each step: the step (from 1; 0 while the peak is measured), of how many, whether it is a
// warm-up step, and its seconds.
using BenchProgress = std::function<void(int step, int steps, bool warmup, double seconds)>;

analysis::Output<findings::BenchReport> bench(const BenchRequest& request,
                                              const BenchProgress& progress = {});

}  // namespace runner
