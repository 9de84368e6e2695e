// The model a config describes: the CausalLM of the config's model section (itself an nn::ModelShape),
// built from the config's seed (parameter init draws from Rng(seed), so the same config gives the same
// initial model).
#pragma once

#include <memory>

#include "nn/transformer.h"
#include "train/config.h"

namespace train {

// Seeded with config.seed; T = float to train, double for the whole-model gradient check.
template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model(const Config& config);

// The same model with its parameters allocated and not drawn (nn::allocate_only): for a caller that writes
// every one of them next, as load_model_checkpoint does (drawing GPT-2 small's 124M initial weights would
// cost a second on every load).
template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model_to_load(const Config& config);

}  // namespace train
