// The basic layers: Linear, Embedding, LayerNorm, and the MLP of a transformer block. Their forwards
// are the model's reference: plain ops, with a hook at every point of nn/hook_points.h. The training
// forward (nn/training_forward.cpp) computes the same functions with fused ops.
// Initialisation (from the caller's seeded generator, in construction order):
//   Linear weight: Xavier-like normal, std sqrt(2 / (in + out)); bias zeros.
//   Embedding (vocab, dim): the same rule with fan_in = vocab, fan_out = dim.
//   LayerNorm: weight ones, bias zeros.
#pragma once

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/hooks.h"
#include "nn/module.h"

namespace nn {

template <typename T>
class Linear : public Module<T> {
 public:
  Linear(int64_t in, int64_t out, ag::Rng& rng, bool bias = true);
  // x (..., in) -> x W^T + b (..., out)
  ag::Tensor<T> forward(const ag::Tensor<T>& x) const { return ag::linear(x, weight, bias); }

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
  // Over the last dim, as its math reads: centred = x - mean(x); scale = 1 / sqrt(mean(centred^2) + eps)
  // (..., 1); out = centred * scale * weight + bias. `at` runs the hooks at `scale_point` and `out_point`.
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                        Point out_point) const;
  ag::Tensor<T> forward(const ag::Tensor<T>& x) const {
    return forward(x, {}, Point::ln_f_scale, Point::ln_f_out);
  }
  ag::Tensor<T>& weight;
  ag::Tensor<T>& bias;
  T eps;
};

// fc2(act(fc1(x))): d_model -> d_ff -> d_model, act gelu_tanh or relu, with hooks at mlp.pre, mlp.post and
// mlp.out.
template <typename T>
class MLP : public Module<T> {
 public:
  // activation "gelu" or "relu" (else std::invalid_argument); bias false: fc1 and fc2 without biases.
  MLP(int64_t d_model, int64_t d_ff, ag::Rng& rng, const std::string& activation = "gelu", bool bias = true);
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at = {}) const {
    const ag::Tensor<T> pre = at(Point::mlp_pre, fc1.forward(x));                          // (B, T, F)
    const ag::Tensor<T> post = at(Point::mlp_post, relu ? ag::relu(pre) : ag::gelu(pre));  // (B, T, F)
    return at(Point::mlp_out, fc2.forward(post));                                          // (B, T, D)
  }
  Linear<T> fc1, fc2;
  bool relu;  // the activation is ReLU (else GELU)
};

}  // namespace nn
