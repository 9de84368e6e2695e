// Checkpoints in RUN/checkpoint/:
//   model.safetensors      every parameter under its name in docs/architecture.md "Checkpoint" (F32,
//                          PyTorch layout); __metadata__ holds "config" (the resolved config as a JSON
//                          string) and "step".
//   optimizer.safetensors  AdamW's moments ("m.<name>", "v.<name>"); __metadata__ holds the step, Adam's
//                          step count and the data generator's state, so a resumed run is bit-exact.
// Both are written atomically (temp file, fsync, rename); loading validates every header against the
// file size and the config before allocating anything, and fails with one line naming the file.
#pragma once

#include <string>

#include "autograd/random.h"
#include "nn/transformer.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace train {

std::string model_checkpoint_path(const std::string& run_dir);
std::string optimizer_checkpoint_path(const std::string& run_dir);

void save_checkpoint(const std::string& run_dir, const Config& config, const nn::CausalLM<float>& model,
                     AdamW& optimizer, const ag::Rng& data_rng, int64_t step);

// Reads RUN/checkpoint/model.safetensors into `model`, whose shapes come from `config`. Returns the step.
int64_t load_model_checkpoint(const std::string& path, nn::CausalLM<float>& model);

// Reads the config stored in a model checkpoint's metadata.
Config config_from_checkpoint(const std::string& path);

// Reads the optimiser file into `optimizer` and `data_rng`; its step must equal `expected_step` (the model
// file's), or the pair was torn and the error says so.
void load_optimizer_checkpoint(const std::string& path, AdamW& optimizer, ag::Rng& data_rng,
                               int64_t expected_step);

}  // namespace train
