// Parameter initialisation from the seeded generator: the lesson's Xavier-like normal
// (std = sqrt(2 / (fan_in + fan_out))), and constants for LayerNorm.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace nn {

template <typename T>
ag::Tensor<T> xavier_normal(const ag::Shape& shape, int64_t fan_in, int64_t fan_out, ag::Rng& rng);

// The generator for a model whose every parameter is written next (a checkpoint loaded into it, a copy of
// another model's): xavier_normal given it allocates the tensor and draws nothing, so its values are
// unset until then. Drawing from it is never meant (it would race between threads).
ag::Rng& allocate_only();

}  // namespace nn
