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
ag::Tensor<T> causal_mask(int64_t t, int64_t window) {
  ag::Tensor<T> m = ag::Tensor<T>::zeros({t, t});
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = i + 1; j < t; ++j) m.data()[i * t + j] = T(1);
    for (int64_t j = 0; window > 0 && j <= i - window; ++j) m.data()[i * t + j] = T(1);
  }
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
ag::Tensor<T> rotate(const ag::Tensor<T>& x, int64_t rotary_dims, double base) {
  if (x.dim() != 4 || rotary_dims < 2 || rotary_dims % 2 != 0 || rotary_dims > x.size(3))
    throw std::invalid_argument("rotate: x " + ag::shape_str(x.shape()) +
                                " is not (B, T, H, dk) or rotary_dims " + std::to_string(rotary_dims) +
                                " is not even in 2..dk");
  const int64_t B = x.size(0), t = x.size(1), H = x.size(2), dk = x.size(3), half = rotary_dims / 2;
  // cos and the signed sin of rotate_half's pairs, (T, 1, dk): broadcast over the batch and the heads.
  ag::Tensor<T> cos = ag::Tensor<T>::full({t, 1, dk}, T(1)), sin = ag::Tensor<T>::zeros({t, 1, dk});
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = ag::rotary_angle(p, i, rotary_dims, base);
      cos.data()[p * dk + i] = cos.data()[p * dk + i + half] = static_cast<T>(std::cos(a));
      sin.data()[p * dk + i] = static_cast<T>(-std::sin(a));        // out1 = x1 cos - x2 sin
      sin.data()[p * dk + i + half] = static_cast<T>(std::sin(a));  // out2 = x2 cos + x1 sin
    }
  // rotate_half's source of each value: x2 for the first half, x1 for the second, itself past them.
  std::vector<int64_t> partner(static_cast<size_t>(x.numel()));
  for (int64_t r = 0; r < B * t * H; ++r)
    for (int64_t j = 0; j < dk; ++j)
      partner[r * dk + j] = r * dk + (j < half ? j + half : j < rotary_dims ? j - half : j);
  return x * cos + ag::take(x, partner, x.shape()) * sin;
}

template <typename T>
ag::Tensor<T> repeat_kv_heads(const ag::Tensor<T>& x, int64_t n_heads) {
  if (x.dim() != 4 || x.size(2) < 1 || n_heads % x.size(2) != 0)
    throw std::invalid_argument("repeat_kv_heads: x " + ag::shape_str(x.shape()) +
                                " is not (B, T, Hkv, dk) with Hkv dividing n_heads " +
                                std::to_string(n_heads));
  const int64_t kv = x.size(2);
  if (kv == n_heads) return x;
  const int64_t B = x.size(0), t = x.size(1), dk = x.size(3), group = n_heads / kv;
  std::vector<int64_t> index(static_cast<size_t>(B * t * n_heads * dk));
  for (int64_t r = 0; r < B * t; ++r)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t j = 0; j < dk; ++j) index[(r * n_heads + h) * dk + j] = (r * kv + h / group) * dk + j;
  return ag::take(x, index, {B, t, n_heads, dk});
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

namespace {
// Checked before any Linear is built (a division by zero otherwise).
int64_t checked_head_dim(int64_t d_model, int64_t n_heads, int64_t n_kv_heads) {
  if (n_heads < 1 || d_model % n_heads != 0)
    throw std::invalid_argument("MultiHeadAttention: n_heads " + std::to_string(n_heads) +
                                " does not divide d_model " + std::to_string(d_model));
  if (n_kv_heads < 1 || n_heads % n_kv_heads != 0)
    throw std::invalid_argument("MultiHeadAttention: n_kv_heads " + std::to_string(n_kv_heads) +
                                " does not divide n_heads " + std::to_string(n_heads));
  return d_model / n_heads;
}
}  // namespace

template <typename T>
MultiHeadAttention<T>::MultiHeadAttention(int64_t d_model_, int64_t n_heads_, ag::Rng& rng, bool bias,
                                          int64_t n_kv_heads_, bool qkv_bias)
    : n_heads(n_heads_),
      d_model(d_model_),
      dk(checked_head_dim(d_model_, n_heads_, n_kv_heads_ > 0 ? n_kv_heads_ : n_heads_)),
      n_kv_heads(n_kv_heads_ > 0 ? n_kv_heads_ : n_heads_),
      wq(d_model_, d_model_, rng, bias || qkv_bias),
      wk(d_model_, n_kv_heads * dk, rng, bias || qkv_bias),
      wv(d_model_, n_kv_heads * dk, rng, bias || qkv_bias),
      wo(d_model_, d_model_, rng, bias) {
  this->register_module("wq", &wq);
  this->register_module("wk", &wk);
  this->register_module("wv", &wv);
  this->register_module("wo", &wo);
}

template <typename T>
MultiHeadAttention<T>::MultiHeadAttention(const ModelShape& s, ag::Rng& rng, size_t layer)
    : MultiHeadAttention(s.d_model, s.n_heads, rng, s.bias, kv_heads(s), s.qkv_bias) {
  window = attn_window(s, layer);
  rotary_dims = nn::rotary_dims(s);
  rotary_base = s.rotary_base;
  attn_scale = s.attn_scale;
  if (s.qk_norm) {
    q_norm = std::make_unique<RMSNorm<T>>(dk, T(s.norm_eps));
    k_norm = std::make_unique<RMSNorm<T>>(dk, T(s.norm_eps));
    this->register_module("q_norm", q_norm.get());
    this->register_module("k_norm", k_norm.get());
  }
}

template <typename T>
T MultiHeadAttention<T>::score_scale() const {
  switch (attn_scale) {
    case AttnScale::sqrt_dk:
      return T(1) / std::sqrt(T(dk));
    case AttnScale::none:
      return T(1);
  }
  throw std::logic_error("MultiHeadAttention: unknown attn_scale");
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
  // Rotary positions turn q and k before their hook points: a hook reads and patches what the scores read.
  auto positioned = [&](const ag::Tensor<T>& y) {
    return rotary_dims ? rotate(y, rotary_dims, rotary_base) : y;
  };
  // QK-norm first (each head's values), then the rotation: Qwen3's order.
  auto normed = [](const std::unique_ptr<RMSNorm<T>>& norm, const ag::Tensor<T>& y) {
    return norm ? norm->forward(y) : y;
  };
  // Grouped-query attention: k and v have n_kv_heads heads; query head h reads kv head h / G.
  auto split_kv_heads = [&](const ag::Tensor<T>& y) { return ag::reshape(y, {B, t, n_kv_heads, dk}); };
  auto repeat_kv = [&](const ag::Tensor<T>& y) { return repeat_kv_heads(y, n_heads); };
  // A pattern spliced in (Hooks::splice) comes from the input alone: q, k and the scores are not computed.
  auto computed_pattern = [&] {
    const ag::Tensor<T> q = at(Point::attn_q, positioned(normed(q_norm, split_heads(wq.forward(x)))));
    const ag::Tensor<T> k =
        repeat_kv(at(Point::attn_k, positioned(normed(k_norm, split_kv_heads(wk.forward(x))))));
    const ag::Tensor<T> scores =
        at(Point::attn_scores, attn_scale == AttnScale::none
                                   ? ag::matmul(per_head(q), ag::transpose(per_head(k)))
                                   : attention_scores(per_head(q), per_head(k)));
    return attention_pattern(scores, mask);
  };
  const auto* splice = at.spliced(Point::attn_pattern);
  const ag::Tensor<T> pattern = at(Point::attn_pattern, splice ? (*splice)(x) : computed_pattern());
  const ag::Tensor<T> v = repeat_kv(at(Point::attn_v, split_kv_heads(wv.forward(x))));
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
  template ag::Tensor<T> rotate<T>(const ag::Tensor<T>&, int64_t, double);                                 \
  template ag::Tensor<T> repeat_kv_heads<T>(const ag::Tensor<T>&, int64_t);                                \
  template ag::Tensor<T> causal_mask<T>(int64_t, int64_t);                                                 \
  template ag::Tensor<T> padding_mask<T>(const std::vector<uint8_t>&, int64_t, int64_t);                   \
  template class SelfAttention<T>;                                                                         \
  template class MultiHeadAttention<T>;
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace nn
