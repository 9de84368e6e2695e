// The training forward: CausalLM's function (nn/transformer.h) with every fusion the training path uses
// and no hook points. It is what CausalLM::forward runs when given no Hooks; the reference forward (the
// modules' forwards) states the math, and tests/nn/test_hooks.cpp holds the two equal (logits and every
// gradient, to float rounding). Its fusions:
//   - ln1 is one op (ag::layer_norm) feeding the three projections;
//   - attention is one op (ag::attention): no (B, H, T, S) scores tensor, no head split or merge copies;
//   - the residual adds happen inside Wo's and fc2's products (ag::linear, ag::gelu_linear with a
//     residual), so their outputs are never tensors of their own;
//   - ln2 with fc1 and ln_f with lm_head are one op each (ag::layer_norm_linear): the LayerNorm's output
//     is recomputed in backward instead of kept;
//   - GELU with fc2 is one op (ag::gelu_linear): GELU's output is never kept.
#pragma once

#include "nn/transformer.h"

namespace nn {

// ids (B*T, row-major) -> logits (B, T, vocab); is_padding as CausalLM::forward.
template <typename T>
ag::Tensor<T> training_forward(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                               int64_t t, const std::vector<uint8_t>& is_padding);

}  // namespace nn
