#include "nn/layers.h"

#include <stdexcept>

#include "nn/init.h"

namespace nn {

template <typename T>
Linear<T>::Linear(int64_t in, int64_t out, ag::Rng& rng, bool with_bias)
    : weight(
          this->register_parameter("weight", xavier_normal<T>({out, in}, in, out, rng), ParamKind::kWeight)) {
  if (with_bias) bias = this->register_parameter("bias", ag::Tensor<T>::zeros({out}), ParamKind::kBias);
}

template <typename T>
Linear<T>::Linear(ag::Tensor<T>& tied_weight, bool with_bias) : weight(tied_weight) {
  if (with_bias)
    bias = this->register_parameter("bias", ag::Tensor<T>::zeros({tied_weight.size(0)}), ParamKind::kBias);
}

template <typename T>
Embedding<T>::Embedding(int64_t vocab, int64_t dim, ag::Rng& rng)
    : weight(this->register_parameter("weight", xavier_normal<T>({vocab, dim}, vocab, dim, rng),
                                      ParamKind::kEmbedding)) {}

template <typename T>
LayerNorm<T>::LayerNorm(int64_t dim, T eps) : Norm<T>(NormKind::layer) {
  this->weight = this->register_parameter("weight", ag::Tensor<T>::full({dim}, T(1)), ParamKind::kNorm);
  this->bias = this->register_parameter("bias", ag::Tensor<T>::zeros({dim}), ParamKind::kNorm);
  this->eps = eps;
}

template <typename T>
ag::Tensor<T> LayerNorm<T>::forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                                    Point out_point) const {
  const ag::Tensor<T> centred = x - ag::mean(x, -1, /*keepdim=*/true);
  const ag::Tensor<T> scale = at(
      scale_point, ag::rsqrt(ag::add_scalar(ag::mean(centred * centred, -1, /*keepdim=*/true), this->eps)));
  return at(out_point, centred * scale * this->weight + this->bias);
}

template <typename T>
RMSNorm<T>::RMSNorm(int64_t dim, T eps) : Norm<T>(NormKind::rms) {
  this->weight = this->register_parameter("weight", ag::Tensor<T>::full({dim}, T(1)), ParamKind::kNorm);
  this->eps = eps;
}

template <typename T>
ag::Tensor<T> RMSNorm<T>::forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                                  Point out_point) const {
  const ag::Tensor<T> scale =
      at(scale_point, ag::rsqrt(ag::add_scalar(ag::mean(x * x, -1, /*keepdim=*/true), this->eps)));
  return at(out_point, x * scale * this->weight);
}

template <typename T>
std::unique_ptr<Norm<T>> make_norm(NormKind kind, int64_t dim, double eps) {
  switch (kind) {
    case NormKind::none:
      return std::make_unique<IdentityNorm<T>>();
    case NormKind::layer:
      return std::make_unique<LayerNorm<T>>(dim, T(eps));
    case NormKind::rms:
      return std::make_unique<RMSNorm<T>>(dim, T(eps));
  }
  throw std::invalid_argument("make_norm: unknown norm kind " + std::to_string(static_cast<int>(kind)));
}

template <typename T>
ag::Tensor<T> activate(Activation activation, const ag::Tensor<T>& x) {
  switch (activation) {
    case Activation::gelu:
      return ag::gelu(x);
    case Activation::relu:
      return ag::relu(x);
    case Activation::relu2: {
      const ag::Tensor<T> r = ag::relu(x);
      return r * r;
    }
    case Activation::swiglu:
      return ag::silu(x);
    case Activation::geglu:
      return ag::gelu(x);
    case Activation::gelu_erf:
      return ag::gelu_erf(x);
  }
  throw std::invalid_argument("activate: unknown activation " + std::to_string(static_cast<int>(activation)));
}

template <typename T>
MLP<T>::MLP(int64_t d_model, int64_t d_ff, ag::Rng& rng, Activation activation_, bool bias)
    : fc1(d_model, d_ff, rng, bias),
      gate(mlp_gated(activation_) ? std::make_unique<Linear<T>>(d_model, d_ff, rng, bias) : nullptr),
      fc2(d_ff, d_model, rng, bias),
      activation(activation_) {
  this->register_module("fc1", &fc1);
  if (gate) this->register_module("gate", gate.get());
  this->register_module("fc2", &fc2);
}

template class Linear<float>;
template class Linear<double>;
template class Embedding<float>;
template class Embedding<double>;
template class LayerNorm<float>;
template class LayerNorm<double>;
template class RMSNorm<float>;
template class RMSNorm<double>;
template std::unique_ptr<Norm<float>> make_norm<float>(NormKind, int64_t, double);
template std::unique_ptr<Norm<double>> make_norm<double>(NormKind, int64_t, double);
template ag::Tensor<float> activate<float>(Activation, const ag::Tensor<float>&);
template ag::Tensor<double> activate<double>(Activation, const ag::Tensor<double>&);
template class MLP<float>;
template class MLP<double>;

}  // namespace nn
