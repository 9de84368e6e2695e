// Attribution patching against activation patching, timed in one process (no process start or checkpoint
// load in either): the two alternate, `rounds` times each, and the medians are printed with their ratio.
//   build/patching_speed RUN_DIR "CLEAN TOKENS" "CORRUPT TOKENS" [rounds]
// The metric is the default of `attograd patch` (top prediction on clean minus top on corrupt).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/patching.h"
#include "train/run_folder.h"
#include "train/token_input.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: patching_speed RUN_DIR CLEAN CORRUPT [rounds]\n");
    return 2;
  }
  try {
    const train::LoadedRun run = train::load_run(argv[1]);
    const std::vector<int32_t> clean = train::parse_token_names(*run.task, argv[2], "CLEAN");
    const std::vector<int32_t> corrupt = train::parse_token_names(*run.task, argv[3], "CORRUPT");
    const int rounds = argc > 4 ? std::stoi(argv[4]) : 21;
    const auto [answer, wrong] = analysis::default_answer_wrong(*run.model, clean, corrupt);
    using clock = std::chrono::steady_clock;
    std::vector<double> attribution, activation;
    for (int i = 0; i < rounds; ++i) {
      auto t0 = clock::now();
      const findings::PatchEffects e =
          analysis::attribution_patching(*run.model, clean, corrupt, answer, wrong);
      auto t1 = clock::now();
      const findings::PatchingResult r =
          analysis::activation_patching(*run.model, clean, corrupt, answer, wrong);
      auto t2 = clock::now();
      attribution.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      activation.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      if (e.resid_pre.size() != r.resid_pre.size()) return 1;
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double a = median(attribution), p = median(activation);
    std::printf(
        "attribution %.3f ms, activation patching %.3f ms (medians of %d alternating rounds): %.1fx\n", a, p,
        rounds, p / a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "patching_speed: %s\n", e.what());
    return 2;
  }
  return 0;
}
