#include "nn/layers.h"

#include <stdexcept>

#include "nn/init.h"

namespace nn {

template <typename T>
Linear<T>::Linear(int64_t in, int64_t out, ag::Rng& rng, bool with_bias)
    : weight(this->register_parameter("weight", xavier_normal<T>({out, in}, in, out, rng))) {
  if (with_bias) bias = this->register_parameter("bias", ag::Tensor<T>::zeros({out}));
}

template <typename T>
Embedding<T>::Embedding(int64_t vocab, int64_t dim, ag::Rng& rng)
    : weight(this->register_parameter("weight", xavier_normal<T>({vocab, dim}, vocab, dim, rng))) {}

template <typename T>
LayerNorm<T>::LayerNorm(int64_t dim, T eps_)
    : weight(this->register_parameter("weight", ag::Tensor<T>::full({dim}, T(1)))),
      bias(this->register_parameter("bias", ag::Tensor<T>::zeros({dim}))),
      eps(eps_) {}

template <typename T>
ag::Tensor<T> LayerNorm<T>::forward(const ag::Tensor<T>& x, const HookSite<T>& at, Point scale_point,
                                    Point out_point) const {
  const ag::Tensor<T> centred = x - ag::mean(x, -1, /*keepdim=*/true);
  const ag::Tensor<T> scale =
      at(scale_point, ag::rsqrt(ag::add_scalar(ag::mean(centred * centred, -1, /*keepdim=*/true), eps)));
  return at(out_point, centred * scale * weight + bias);
}

template <typename T>
MLP<T>::MLP(int64_t d_model, int64_t d_ff, ag::Rng& rng, const std::string& activation, bool bias)
    : fc1(d_model, d_ff, rng, bias), fc2(d_ff, d_model, rng, bias), relu(activation == "relu") {
  if (activation != "gelu" && activation != "relu")
    throw std::invalid_argument("MLP: activation must be \"gelu\" or \"relu\", got \"" + activation + "\"");
  this->register_module("fc1", &fc1);
  this->register_module("fc2", &fc2);
}

template class Linear<float>;
template class Linear<double>;
template class Embedding<float>;
template class Embedding<double>;
template class LayerNorm<float>;
template class LayerNorm<double>;
template class MLP<float>;
template class MLP<double>;

}  // namespace nn
