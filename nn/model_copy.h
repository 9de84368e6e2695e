// A model converted to float64, parameter for parameter: what a reader that needs float64 values (the
// attribution graph's replacement model, Python's dtype="float64") runs instead of the float32 model.
#pragma once

#include <memory>

#include "nn/transformer.h"

namespace nn {

// The same architecture with every parameter's current values converted; its parameters are allocated, not
// drawn (nn::allocate_only), since each is written next.
std::unique_ptr<CausalLM<double>> float64_copy(const CausalLM<float>& model);

}  // namespace nn
