// Checkpoints in RUN/checkpoint/:
//   model.safetensors             every parameter under its docs/architecture.md name (F32, PyTorch layout);
//                                 __metadata__ holds "config" (the resolved config as JSON) and "step".
//   optimizer-NNNNNN.safetensors  AdamW's moments ("m.<name>", "v.<name>") at step NNNNNN; __metadata__
//                                 holds the step, Adam's step count and the data generator's state, so a
//                                 resumed run is bit-exact.
// Each file is written atomically (io::AtomicFile). The optimiser file of the new step goes first, then
// model.safetensors replaces the old one: that rename is the moment the checkpoint moves on, and only then
// are older optimiser files removed. A crash at any point leaves model.safetensors with the optimiser file
// of its own step beside it, so the last complete checkpoint always resumes. Loading validates every header
// against the file size and the config before allocating anything, and fails with one line naming the file.
#pragma once

#include <string>

#include "autograd/random.h"
#include "nn/transformer.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace train {

void save_checkpoint(const std::string& run_dir, const Config& config, const nn::CausalLM<float>& model,
                     AdamW& optimizer, const ag::Rng& data_rng, int64_t step);

// A new run folder `run_dir` holding `model` as a checkpoint at `step`: config.json (config with output.dir
// set to run_dir) and checkpoint/ with zero optimiser moments and the config's data seed, so that every tool
// opens it and a resume starts the optimiser afresh. Refuses (std::invalid_argument naming `path`) a folder
// that already holds a model checkpoint.
void save_model_run(const std::string& run_dir, Config config, const nn::CausalLM<float>& model,
                    int64_t step);

// The largest weight magnitude a model file may hold: a trained model's weights are a few units at most,
// and beyond this its forward would overflow float32 into inf and NaN.
constexpr double kMaxWeightMagnitude = 1e6;

// Reads RUN/checkpoint/model.safetensors into `model`, whose shapes come from `config`. Returns the step.
// A tensor holding a value that is not finite, or beyond kMaxWeightMagnitude, is refused naming it. Each
// tensor is read straight into its parameter, so a refused file (missing or misshapen tensors excepted:
// those are refused before any value is read) leaves `model` partly overwritten: give it a fresh model.
int64_t load_model_checkpoint(const std::string& path, nn::CausalLM<float>& model);

// model.init_from: loads RUN/checkpoint/model.safetensors (RUN = model.init_from) into `model`, the model
// of a fresh run of `config`, after checking that RUN/config.json's model section equals config.model in
// every field but init_from (each shapes a tensor or the forward). Any other problem (no folder, no
// config.json or checkpoint, a missing or misshapen tensor) is one line naming the file or field:
// "model.init_from RUN: model.d_model is 32 here but 16 in RUN/config.json". The trainer calls it at step 0
// only: a resumed run continues from its own checkpoint.
void init_from_run(const Config& config, nn::CausalLM<float>& model);

// The step stored in a model checkpoint's metadata (its header only is read).
int64_t step_from_checkpoint(const std::string& path);
// Reads the config stored in a model checkpoint's metadata.
Config config_from_checkpoint(const std::string& path);

// Reads the optimiser file into `optimizer` and `data_rng`; its step must equal `expected_step` (the model
// file's), or the pair was torn and the error says so. Moments that are not finite (or a negative second
// moment) are refused naming the tensor.
void load_optimizer_checkpoint(const std::string& path, AdamW& optimizer, ag::Rng& data_rng,
                               int64_t expected_step);

}  // namespace train
