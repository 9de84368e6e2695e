// LayerNorm's arithmetic on one row, for every op that normalises (layer_norm in ops_norm.cpp, the fused
// layer_norm_linear in ops_linear_fused.cpp), so they compute the same formula. Internal to autograd/.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/row_block_sums.h"
#include "autograd/tensor.h"

namespace ag::detail {

// Throws std::invalid_argument naming `op` unless x has a last dim of some size D > 0, weight and bias are
// (D) and eps > 0.
template <typename T>
void check_layer_norm_args(const char* op, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                           T eps) {
  const std::string name(op);
  if (!x.defined() || !weight.defined() || !bias.defined())
    throw std::invalid_argument(name + ": x, weight and bias must all be defined");
  if (x.dim() == 0 || x.shape().back() == 0)
    throw std::invalid_argument(name + ": x of shape " + shape_str(x.shape()) +
                                " has no last dim to normalise");
  const int64_t cols = x.shape().back();
  if (weight.shape() != Shape{cols} || bias.shape() != Shape{cols})
    throw std::invalid_argument(name + ": x of shape " + shape_str(x.shape()) +
                                " needs weight and bias of shape " + shape_str({cols}) + ", got weight " +
                                shape_str(weight.shape()) + " and bias " + shape_str(bias.shape()));
  if (!(eps > T(0))) throw std::invalid_argument(name + ": eps must be positive, got " + std::to_string(eps));
}

// The row's mean and 1 / sqrt(biased variance + eps). Two passes (mean, then squared deviations) rather
// than E[x^2] - E[x]^2, which cancels badly in float.
template <typename T>
void layer_norm_stats(const ConstVecMap<T>& x, T eps, T& mean, T& rstd) {
  mean = x.mean();
  const T var = (x - mean).square().mean();
  rstd = T(1) / std::sqrt(var + eps);
}

// y = (x - mean) * rstd * weight + bias.
template <typename T>
void layer_norm_row(const ConstVecMap<T>& x, T mean, T rstd, const ConstVecMap<T>& weight,
                    const ConstVecMap<T>& bias, VecMap<T> y) {
  y = (x - mean) * rstd * weight + bias;
}

// The row's dx from its dy, passed to put as an expression: with xhat = (x - mean) * rstd and
// g = dy * weight, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <typename T, typename Put>
void layer_norm_row_backward(const ConstVecMap<T>& x, const ConstVecMap<T>& dy, const ConstVecMap<T>& weight,
                             T mean, T rstd, Put&& put) {
  const T inv_cols = T(1) / static_cast<T>(x.size());
  const T g_mean = (dy * weight).sum() * inv_cols;
  const T gx_mean = (dy * weight * (x - mean)).sum() * rstd * inv_cols;
  put(rstd * (dy * weight - g_mean - (x - mean) * rstd * gx_mean));
}

// The affine parameters' gradients from rows x cols of dy, x and their per-row mean and rstd:
// dweight (+)= the column sums of dy * xhat, dbias (+)= those of dy (either Grad may be empty), in blocks
// of rows (row_block_sums.h).
template <typename T>
void put_layer_norm_param_grads(const Grad<T>& dweight, const Grad<T>& dbias, int64_t rows, int64_t cols,
                                const T* dy, const T* x, const T* mean, const T* rstd) {
  if (!dweight && !dbias) return;
  // Per block: the weight's sums, then the bias's.
  sum_row_blocks<T>(
      rows, cols, 2, 3,
      [&](int64_t r, T* sums) {
        ConstVecMap<T> dyr(dy + r * cols, cols);
        if (dweight) VecMap<T>(sums, cols) += dyr * (ConstVecMap<T>(x + r * cols, cols) - mean[r]) * rstd[r];
        if (dbias) VecMap<T>(sums + cols, cols) += dyr;
      },
      [&](const T* sums) {
        if (dweight) dweight.put(0, cols, ConstVecMap<T>(sums, cols));
        if (dbias) dbias.put(0, cols, ConstVecMap<T>(sums + cols, cols));
      });
}

}  // namespace ag::detail
