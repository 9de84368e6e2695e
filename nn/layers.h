// The basic layers: Linear, Embedding, the norms (nn::Norm: LayerNorm, RMSNorm, IdentityNorm), and the MLP of
// a transformer block. Their forwards are the model's reference: plain ops, with a hook at every point of
// nn/hook_points.h. The training forward (nn/training_forward.cpp) computes the same functions with fused
// ops (a norm's forward_fused and forward_linear).
// Initialisation (from the caller's seeded generator, in construction order):
//   Linear weight: Xavier-like normal, std sqrt(2 / (in + out)); bias zeros.
//   Embedding (vocab, dim): the same rule with fan_in = vocab, fan_out = dim.
//   LayerNorm: weight ones, bias zeros. RMSNorm: weight ones.
#pragma once

#include <memory>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/hooks.h"
#include "nn/model_shape.h"
#include "nn/module.h"

namespace nn {

template <typename T>
class Linear : public Module<T> {
 public:
  Linear(int64_t in, int64_t out, ag::Rng& rng, bool bias = true);
  // A Linear whose weight (out, in) is another module's registered parameter (tied: lm_head reading
  // tok_emb's weight): nothing is drawn and only the bias, if any, is this module's parameter.
  Linear(ag::Tensor<T>& tied_weight, bool bias);
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

// A norm (ln1, ln2, ln_f), held by this interface: the model, the training forward and the study tools all
// ask it, never a concrete type. Each kind of nn::NormKind computes, per row x of the last dim,
//   out = c * scale * weight + bias,  c = x - mean(x) when centres() else x,  scale = 1 / sqrt(mean(c^2) +
//   eps)
// with weight and bias undefined where the kind has none; the kind `none` is the identity (normalises()
// false, no parameters).
template <typename T>
class Norm : public Module<T> {
 public:
  NormKind kind() const { return kind_; }
  bool normalises() const { return has_norm(kind_); }
  bool centres() const { return norm_centres(kind_); }

  // The reference forward: `at` runs the hooks at `scale_point` (scale, (..., 1)) and `out_point`, when the
  // kind normalises.
  virtual ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                                Point out_point) const = 0;
  ag::Tensor<T> forward(const ag::Tensor<T>& x) const {
    return forward(x, {}, Point::ln_f_scale, Point::ln_f_out);
  }
  // The training forward's (nn/training_forward.cpp), with fused ops: norm(x), and linear(norm(x), w, b)
  // without storing norm(x).
  virtual ag::Tensor<T> forward_fused(const ag::Tensor<T>& x) const = 0;
  virtual ag::Tensor<T> forward_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& w,
                                       const ag::Tensor<T>& b) const = 0;

  ag::Tensor<T> weight, bias;  // (dim) each, or undefined
  T eps = T(0);

 protected:
  explicit Norm(NormKind kind) : kind_(kind) {}

 private:
  NormKind kind_;
};

// NormKind::none: the identity, without parameters or hook points.
template <typename T>
class IdentityNorm : public Norm<T> {
 public:
  IdentityNorm() : Norm<T>(NormKind::none) {}
  using Norm<T>::forward;
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>&, Point, Point) const override { return x; }
  ag::Tensor<T> forward_fused(const ag::Tensor<T>& x) const override { return x; }
  ag::Tensor<T> forward_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& w,
                               const ag::Tensor<T>& b) const override {
    return ag::linear(x, w, b);
  }
};

// NormKind::layer.
template <typename T>
class LayerNorm : public Norm<T> {
 public:
  explicit LayerNorm(int64_t dim, T eps = T(1e-5));
  using Norm<T>::forward;
  // As its math reads: centred = x - mean(x); scale = 1 / sqrt(mean(centred^2) + eps) (..., 1);
  // out = centred * scale * weight + bias.
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                        Point out_point) const override;
  ag::Tensor<T> forward_fused(const ag::Tensor<T>& x) const override {
    return ag::layer_norm(x, this->weight, this->bias, this->eps);
  }
  ag::Tensor<T> forward_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& w,
                               const ag::Tensor<T>& b) const override {
    return ag::layer_norm_linear(x, this->weight, this->bias, w, b, this->eps);
  }
};

// NormKind::rms: LayerNorm without the centring and the bias.
template <typename T>
class RMSNorm : public Norm<T> {
 public:
  explicit RMSNorm(int64_t dim, T eps = T(1e-5));
  using Norm<T>::forward;
  // As its math reads: scale = 1 / sqrt(mean(x^2) + eps) (..., 1); out = x * scale * weight.
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                        Point out_point) const override;
  ag::Tensor<T> forward_fused(const ag::Tensor<T>& x) const override {
    return ag::rms_norm(x, this->weight, this->eps);
  }
  // The norm's output is kept (one (..., dim) tensor): there is no fused rms_norm_linear.
  ag::Tensor<T> forward_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& w,
                               const ag::Tensor<T>& b) const override {
    return ag::linear(ag::rms_norm(x, this->weight, this->eps), w, b);
  }
};

// The norm of a kind over rows of `dim`, with `eps` under its square root (ModelShape::norm_eps).
template <typename T>
std::unique_ptr<Norm<T>> make_norm(NormKind kind, int64_t dim, double eps = 1e-5);

// The activation function of a kind: of a gated kind, the gate's (silu for swiglu, gelu for geglu).
template <typename T>
ag::Tensor<T> activate(Activation activation, const ag::Tensor<T>& x);

// fc2(act(fc1(x))): d_model -> d_ff -> d_model, with hooks at mlp.pre, mlp.post and mlp.out; gated
// (mlp_gated(activation)): fc2(act(gate(x)) * fc1(x)), fc1 the up projection and fc2 the down, with a hook
// at mlp.gate (gate(x), before its activation) too.
template <typename T>
class MLP : public Module<T> {
 public:
  // bias false: fc1, gate and fc2 without biases. Parameters are drawn in the order fc1, gate, fc2.
  MLP(int64_t d_model, int64_t d_ff, ag::Rng& rng, Activation activation = Activation::gelu,
      bool bias = true);
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const HookSite<T>& at = {}) const {
    if (const auto* splice = at.spliced(Point::mlp_out)) return at(Point::mlp_out, (*splice)(x));
    const ag::Tensor<T> pre = at(Point::mlp_pre, fc1.forward(x));  // (B, T, F)
    const ag::Tensor<T> post =
        gate ? at(Point::mlp_post, activate(activation, at(Point::mlp_gate, gate->forward(x))) * pre)
             : at(Point::mlp_post, activate(activation, pre));  // (B, T, F)
    return at(Point::mlp_out, fc2.forward(post));               // (B, T, D)
  }
  Linear<T> fc1;
  std::unique_ptr<Linear<T>> gate;  // null unless gated
  Linear<T> fc2;
  Activation activation;
};

}  // namespace nn
