// Opening a finished (or interrupted) run folder: its config, task and the model of its last checkpoint,
// for eval, forward, attend, compare and ablate. Fails with one line naming the file when the folder,
// the checkpoint or its config is missing or corrupt.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

// The model input checks and conversions shared by the study commands and the Python module; errors are
// std::invalid_argument, one line naming `argument`.
// Throws "ARGUMENT: N tokens, but the model takes at most max_len M" when n > max_len.
void check_input_length(const LoadedRun& run, size_t n, const std::string& argument);

// Token names from `text`. When the task has a BOS token and the first token is not BOS, BOS is put in
// front and *bos_added is set: the tasks' sequences all start with it, so a model never saw an input
// without it. Throws when the input is longer than max_len.
std::vector<int32_t> input_from_names(const LoadedRun& run, const std::string& text,
                                      const std::string& argument, bool* bos_added);
// Raw ids, taken exactly as given (no BOS added); the same length check.
std::vector<int32_t> input_from_ids(const LoadedRun& run, const std::string& text,
                                    const std::string& argument);

// N held-out sequences for eval and ablate (the config's train.eval_size when n <= 0), within what
// train.eval_size accepts (its range and the memory estimate), checked before any is made; otherwise
// "ARGUMENT N: /train/eval_size: ...".
int held_out_count(const LoadedRun& run, int n, const std::string& argument = "--n");

}  // namespace train
