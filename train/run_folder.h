// Opening a finished (or interrupted) run folder: its config, task and the model of its last checkpoint,
// for eval, forward, attend, compare and ablate. Fails with one line naming the file when the folder,
// the checkpoint or its config is missing or corrupt.
#pragma once

#include <memory>
#include <string>

#include "nn/transformer.h"
#include "train/config.h"
#include "train/tasks.h"

namespace train {

struct LoadedRun {
  std::string dir;
  Config config;
  std::unique_ptr<Task> task;
  std::unique_ptr<nn::CausalLM<float>> model;
  int64_t step = 0;
};

LoadedRun load_run(const std::string& run_dir);

}  // namespace train
