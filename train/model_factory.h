// The model a config describes: nn::ModelShape from the resolved config, and building the CausalLM from the
// config's seed (parameter init draws from Rng(seed), so the same config gives the same initial model).
#pragma once

#include <memory>

#include "nn/transformer.h"
#include "train/config.h"

namespace train {

nn::ModelShape model_shape(const Config& config);
// Seeded with config.seed; T = float to train, double for the whole-model gradient check.
template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model(const Config& config);

}  // namespace train
