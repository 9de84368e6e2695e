// The dictionary activations SAELens trains beside ReLU and TopK, as autograd ops with their own backward
// (written as autograd/ops.h's recipe says for an op outside autograd/): JumpReLU and its step function,
// whose thresholds learn through SAELens's straight-through pseudo-derivatives with a bandwidth, and
// BatchTopK. dictionary/sae.h's sae_forward uses them; tests/dictionary/test_sae_activations.cpp checks each
// gradient in float64 (numerically where the op is differentiable, against its definition where the
// gradient is a pseudo-derivative).
#pragma once

#include <cstdint>

#include "autograd/tensor.h"

namespace dictionary {

// f = pre * (pre > threshold) for pre (N, M) and threshold (M) (SAELens's JumpReLU). d pre = dy where
// pre > threshold, 0 elsewhere; d threshold_j = sum_n -(threshold_j / bandwidth) K((pre_nj - threshold_j) /
// bandwidth) dy_nj, with K the rectangle kernel (1 on (-1/2, 1/2), 0 elsewhere).
template <typename T>
ag::Tensor<T> jumprelu(const ag::Tensor<T>& pre, const ag::Tensor<T>& threshold, T bandwidth);

// H = (pre > threshold) as 0 or 1 (SAELens's Step: its sum over features is L0). d pre = 0; d threshold_j =
// sum_n -(1 / bandwidth) K((pre_nj - threshold_j) / bandwidth) dy_nj.
template <typename T>
ag::Tensor<T> jumprelu_step(const ag::Tensor<T>& pre, const ag::Tensor<T>& threshold, T bandwidth);

// relu(pre) for pre (N, M) with only the `keep` largest entries of the whole batch kept, the rest 0 (ties:
// the lower flat index); the gradient flows to the kept positive entries (SAELens's BatchTopK, keep = k N).
template <typename T>
ag::Tensor<T> batch_topk_relu(const ag::Tensor<T>& pre, int64_t keep);

}  // namespace dictionary
