// Parameter initialisation from the seeded generator: the lesson's Xavier-like normal
// (std = sqrt(2 / (fan_in + fan_out))), and constants for LayerNorm.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace nn {

template <typename T>
ag::Tensor<T> xavier_normal(const ag::Shape& shape, int64_t fan_in, int64_t fan_out, ag::Rng& rng);

}  // namespace nn
