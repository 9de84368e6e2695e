// A short training run for a test: configs/NAME with `overrides`, trained into a run folder, and the
// first held-out sequence of a run (train::LoadedRun or analysis::StudyRun) as token ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/trainer.h"

namespace testing {

// Trains configs/`config_name` (e.g. "modadd.json") with `overrides` into the run folder `dir`.
inline void train_run(const std::string& dir, const std::string& config_name,
                      const std::vector<std::string>& overrides) {
  const train::Config config =
      train::load_config(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/" + config_name, overrides);
  train::train_model(config, {dir, false, nullptr, {}});
}

// The first sequence of the run's held-out set (its task's eval_set at the config's seed).
template <typename Run>
std::vector<int32_t> first_eval_ids(const Run& run) {
  const train::Batch b = run.task->eval_set(run.config.seed, 1);
  return std::vector<int32_t>(b.inputs.begin(), b.inputs.begin() + b.T);
}

}  // namespace testing
