// The basic layers: Linear, Embedding, LayerNorm, and the GELU MLP of a transformer block.
// Initialisation (from the caller's seeded generator, in construction order):
//   Linear weight: Xavier-like normal, std sqrt(2 / (in + out)); bias zeros.
//   Embedding (vocab, dim): the same rule with fan_in = vocab, fan_out = dim.
//   LayerNorm: weight ones, bias zeros.
#pragma once

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/module.h"

namespace nn {

template <typename T>
class LayerNorm;

template <typename T>
class Linear : public Module<T> {
 public:
  Linear(int64_t in, int64_t out, ag::Rng& rng, bool bias = true);
  // With `residual` defined: residual + forward(x), the add fused into the product (ag::linear).
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& residual = {}) const {
    return ag::linear(x, weight, bias, residual);
  }
  // forward(norm.forward(x)), with the LayerNorm's output recomputed in backward instead of kept
  // (ag::layer_norm_linear).
  ag::Tensor<T> forward_normed(const LayerNorm<T>& norm, const ag::Tensor<T>& x) const;

  ag::Tensor<T>& weight;  // (out, in), as nn.Linear
  ag::Tensor<T> bias;     // (out), or undefined
};

template <typename T>
class Embedding : public Module<T> {
 public:
  Embedding(int64_t vocab, int64_t dim, ag::Rng& rng);
  // ids laid out as ids_shape -> ids_shape + [dim]
  ag::Tensor<T> forward(const std::vector<int32_t>& ids, const ag::Shape& ids_shape) const {
    return ag::embedding(weight, ids, ids_shape);
  }
  ag::Tensor<T>& weight;  // (vocab, dim)
};

template <typename T>
class LayerNorm : public Module<T> {
 public:
  explicit LayerNorm(int64_t dim, T eps = T(1e-5));
  ag::Tensor<T> forward(const ag::Tensor<T>& x) const { return ag::layer_norm(x, weight, bias, eps); }
  ag::Tensor<T>& weight;
  ag::Tensor<T>& bias;
  T eps;
};

template <typename T>
ag::Tensor<T> Linear<T>::forward_normed(const LayerNorm<T>& norm, const ag::Tensor<T>& x) const {
  return ag::layer_norm_linear(x, norm.weight, norm.bias, weight, bias, norm.eps);
}

// fc2(gelu_tanh(fc1(x))): d_model -> d_ff -> d_model. GELU and fc2 are one op (ag::gelu_linear), so the
// graph never holds GELU's output; with `residual` defined, residual + the MLP's output, in the same op.
template <typename T>
class MLP : public Module<T> {
 public:
  MLP(int64_t d_model, int64_t d_ff, ag::Rng& rng);
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& residual = {}) const {
    return ag::gelu_linear(fc1.forward(x), fc2.weight, fc2.bias, residual);
  }
  // forward(norm.forward(x), residual), with the LayerNorm's output recomputed in fc1's backward instead
  // of kept.
  ag::Tensor<T> forward_normed(const LayerNorm<T>& norm, const ag::Tensor<T>& x,
                               const ag::Tensor<T>& residual = {}) const {
    return ag::gelu_linear(fc1.forward_normed(norm, x), fc2.weight, fc2.bias, residual);
  }
  Linear<T> fc1, fc2;
};

}  // namespace nn
