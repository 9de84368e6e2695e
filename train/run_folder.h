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

// Token ids from "--tokens" (the task's names, e.g. "BOS 3 1 4") or "--ids" ("0 5 3 6"), checked against
// the task's vocabulary and the model's max_len; errors name the argument and the bad token.
std::vector<int32_t> parse_token_names(const Task& task, const std::string& text,
                                       const std::string& argument);
std::vector<int32_t> parse_token_ids(int vocab, const std::string& text, const std::string& argument);

}  // namespace train
