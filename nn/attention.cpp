#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "nn/init.h"

namespace nn {

namespace {
// q k^T / sqrt(dk): (..., T, S). Dot products grow like sqrt(dk); dividing keeps softmax out of saturation,
// where its gradient vanishes.
template <typename T>
ag::Tensor<T> attention_scores(const ag::Tensor<T>& q, const ag::Tensor<T>& k) {
  return ag::scale(ag::matmul(q, ag::transpose(k)), T(1) / std::sqrt(T(q.size(-1))));
}

// softmax(scores, -inf where mask is set): the weights, (..., T, S).
template <typename T>
ag::Tensor<T> attention_pattern(const ag::Tensor<T>& scores, const ag::Tensor<T>& mask) {
  if (!mask.defined()) return ag::softmax(scores);
  return ag::softmax(ag::masked_fill(scores, mask, -std::numeric_limits<T>::infinity()));
}
}  // namespace

template <typename T>
AttentionResult<T> scaled_dot_product_attention(const ag::Tensor<T>& q, const ag::Tensor<T>& k,
                                                const ag::Tensor<T>& v, const ag::Tensor<T>& mask) {
  ag::Tensor<T> weights = attention_pattern(attention_scores(q, k), mask);
  return {ag::matmul(weights, v), weights};
}

template <typename T>
ag::Tensor<T> causal_mask(int64_t t) {
  ag::Tensor<T> m = ag::Tensor<T>::zeros({t, t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) m.data()[i * t + j] = T(1);
  return m;
}

template <typename T>
ag::Tensor<T> padding_mask(const std::vector<uint8_t>& is_padding, int64_t batch, int64_t t) {
  if (static_cast<int64_t>(is_padding.size()) != batch * t)
    throw std::invalid_argument("padding_mask: " + std::to_string(is_padding.size()) + " flags for batch " +
                                std::to_string(batch) + " x T " + std::to_string(t));
  ag::Tensor<T> m = ag::Tensor<T>::zeros({batch, 1, 1, t});
  for (int64_t i = 0; i < batch * t; ++i) m.data()[i] = is_padding[i] ? T(1) : T(0);
  return m;
}

template <typename T>
SelfAttention<T>::SelfAttention(int64_t d_model, int64_t dk, int64_t dv, ag::Rng& rng)
    : wq(this->register_parameter("wq", xavier_normal<T>({d_model, dk}, d_model, dk, rng),
                                  ParamKind::kWeight)),
      wk(this->register_parameter("wk", xavier_normal<T>({d_model, dk}, d_model, dk, rng),
                                  ParamKind::kWeight)),
      wv(this->register_parameter("wv", xavier_normal<T>({d_model, dv}, d_model, dv, rng),
                                  ParamKind::kWeight)) {}

template <typename T>
AttentionResult<T> SelfAttention<T>::forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask) const {
  return scaled_dot_product_attention(ag::matmul(x, wq), ag::matmul(x, wk), ag::matmul(x, wv), mask);
}

template <typename T>
MultiHeadAttention<T>::MultiHeadAttention(int64_t d_model_, int64_t n_heads_, ag::Rng& rng, bool bias)
    : n_heads(n_heads_),
      d_model(d_model_),
      dk(d_model_ / n_heads_),
      wq(d_model_, d_model_, rng, bias),
      wk(d_model_, d_model_, rng, bias),
      wv(d_model_, d_model_, rng, bias),
      wo(d_model_, d_model_, rng, bias) {
  if (n_heads_ < 1 || d_model_ % n_heads_ != 0)
    throw std::invalid_argument("MultiHeadAttention: n_heads " + std::to_string(n_heads_) +
                                " does not divide d_model " + std::to_string(d_model_));
  this->register_module("wq", &wq);
  this->register_module("wk", &wk);
  this->register_module("wv", &wv);
  this->register_module("wo", &wo);
}

template <typename T>
ag::Tensor<T> MultiHeadAttention<T>::forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask,
                                             const HookSite<T>& at) const {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw std::invalid_argument("MultiHeadAttention: expected x (B, T, " + std::to_string(d_model) +
                                "), got " + ag::shape_str(x.shape()));
  const int64_t B = x.size(0), t = x.size(1);
  // (B, T, D) -> (B, T, H, dk): head h is columns [h*dk, (h+1)*dk) of a projection.
  auto split_heads = [&](const ag::Tensor<T>& y) { return ag::reshape(y, {B, t, n_heads, dk}); };
  // (B, T, H, dk) -> (B, H, T, dk): one matrix per batch entry and head.
  auto per_head = [](const ag::Tensor<T>& y) { return ag::permute(y, {0, 2, 1, 3}); };
  const ag::Tensor<T> q = at(Point::attn_q, split_heads(wq.forward(x)));
  const ag::Tensor<T> k = at(Point::attn_k, split_heads(wk.forward(x)));
  const ag::Tensor<T> v = at(Point::attn_v, split_heads(wv.forward(x)));
  const ag::Tensor<T> scores = at(Point::attn_scores, attention_scores(per_head(q), per_head(k)));
  const ag::Tensor<T> pattern = at(Point::attn_pattern, attention_pattern(scores, mask));
  // (B, H, T, dk) -> (B, T, H, dk)
  const ag::Tensor<T> z = at(Point::attn_z, ag::permute(ag::matmul(pattern, per_head(v)), {0, 2, 1, 3}));
  // Wo mixes the heads.
  if (!at.wants(Point::attn_result)) return at(Point::attn_out, wo.forward(ag::reshape(z, {B, t, d_model})));
  // Each head's write into the stream, asked for by a hook: result[b, t, h] = z[b, t, h] Wo_h^T, with Wo_h
  // the columns [h*dk, (h+1)*dk) of Wo (D, D): Wo^T as (H, dk, D) times z as (H, B*T, dk).
  const ag::Tensor<T> wo_heads = ag::reshape(ag::permute(wo.weight, {1, 0}), {n_heads, dk, d_model});
  const ag::Tensor<T> z_heads = ag::reshape(ag::permute(z, {2, 0, 1, 3}), {n_heads, B * t, dk});
  const ag::Tensor<T> computed =
      ag::permute(ag::reshape(ag::matmul(z_heads, wo_heads), {n_heads, B, t, d_model}), {1, 2, 0, 3});
  const ag::Tensor<T> result = at(Point::attn_result, computed);
  // A hook that only reads it leaves attn.out as without it, to the bit; a replacement flows on as the
  // sum over heads plus Wo's bias.
  if (result.data() == computed.data())
    return at(Point::attn_out, wo.forward(ag::reshape(z, {B, t, d_model})));
  ag::Tensor<T> out = ag::sum(result, 2);
  if (wo.bias.defined()) out = ag::add(out, wo.bias);
  return at(Point::attn_out, out);
}

#define ATTOGRAD_INSTANTIATE(T)                                                                            \
  template AttentionResult<T> scaled_dot_product_attention<T>(const ag::Tensor<T>&, const ag::Tensor<T>&,  \
                                                              const ag::Tensor<T>&, const ag::Tensor<T>&); \
  template ag::Tensor<T> causal_mask<T>(int64_t);                                                          \
  template ag::Tensor<T> padding_mask<T>(const std::vector<uint8_t>&, int64_t, int64_t);                   \
  template class SelfAttention<T>;                                                                         \
  template class MultiHeadAttention<T>;
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace nn
