// Attention, as the lesson builds it: scaled dot-product attention, the lesson's one-head SelfAttention,
// and MultiHeadAttention with its output projection Wo (docs/architecture.md's layout: head h owns output
// rows [h*dk, (h+1)*dk) of wq/wk/wv and input columns [h*dk, (h+1)*dk) of wo). Dimension letters: B batch, H
// heads, T query positions, S key positions, D d_model, dk per-head width.
#pragma once

#include <memory>
#include <optional>

#include "nn/hooks.h"
#include "nn/layers.h"
#include "nn/model_shape.h"

namespace nn {

template <typename T>
struct AttentionResult {
  ag::Tensor<T> output;   // (..., T, dv)
  ag::Tensor<T> weights;  // (..., T, S): row i says where query i looks; rows sum to 1 (or 0 if fully masked)
};

// softmax(Q K^T / sqrt(dk) + mask) V. mask: undefined, or nonzero where a query may NOT look, broadcastable
// to (..., T, S): causal (T, S), padding (B, 1, 1, S), or any (B, 1 or H, T, S). A fully masked row gives
// zero weights, zero output and zero gradient.
template <typename T>
AttentionResult<T> scaled_dot_product_attention(const ag::Tensor<T>& q, const ag::Tensor<T>& k,
                                                const ag::Tensor<T>& v, const ag::Tensor<T>& mask = {});

// Masks (1 = masked), as tensors of the model's scalar type.
// (T, T): key j > query i is masked, and with a window w > 0 also key j <= i - w (query i sees (i - w, i]).
template <typename T>
ag::Tensor<T> causal_mask(int64_t t, int64_t window = 0);
// (B, 1, 1, T) from per-sequence flags (1 = padding), key positions only.
template <typename T>
ag::Tensor<T> padding_mask(const std::vector<uint8_t>& is_padding, int64_t batch, int64_t t);

// The lesson's module: one head, no biases, Wq, Wk (d x dk) and Wv (d x dv) applied as x W.
// Rotary positions as their math reads, on x (B, T, H, dk) at positions 0 .. T-1:
//   x * cos + rotate_half(x) * sin,  rotate_half(x) = (-x2, x1) on each head's first rotary_dims values
// (x1 the first half of them, x2 the second), cos and sin of ag::rotary_angle per position and pair (1 and
// 0 past rotary_dims). The same function as the fused ag::rotary, from elementwise ops and ag::take.
template <typename T>
ag::Tensor<T> rotate(const ag::Tensor<T>& x, int64_t rotary_dims, double base);

// Grouped-query attention's head sharing as its math reads: x (B, T, Hkv, dk) -> (B, T, n_heads, dk), head
// h a copy of x's head h / (n_heads / Hkv) (ag::take; its gradient sums the copies). x itself when Hkv is
// n_heads.
template <typename T>
ag::Tensor<T> repeat_kv_heads(const ag::Tensor<T>& x, int64_t n_heads);

template <typename T>
class SelfAttention : public Module<T> {
 public:
  SelfAttention(int64_t d_model, int64_t dk, int64_t dv, ag::Rng& rng);
  AttentionResult<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask = {}) const;
  ag::Tensor<T>&wq, &wk, &wv;
};

template <typename T>
class MultiHeadAttention : public Module<T> {
 public:
  // bias false: Wq, Wk, Wv and Wo without biases; qkv_bias true: Wq, Wk and Wv with biases whatever bias
  // says. n_kv_heads: the key and value heads (0: n_heads), a divisor of n_heads; Wk and Wv are
  // (n_kv_heads * dk, d_model).
  MultiHeadAttention(int64_t d_model, int64_t n_heads, ag::Rng& rng, bool bias = true, int64_t n_kv_heads = 0,
                     bool qkv_bias = false);
  // The attention of block `layer` of a model of this shape: its d_model, n_heads, n_kv_heads, bias,
  // qkv_bias, positions (rotary: q and k turned by their position, rotary_dims(shape) of each head) and
  // window.
  MultiHeadAttention(const ModelShape& shape, ag::Rng& rng, size_t layer = 0);
  // x (B, T, D) -> (B, T, D), as its math reads, with hooks at attn.q, .k, .v, .scores, .pattern, .z and
  // .out (nn/hook_points.h); Hkv = n_kv_heads, G = H / Hkv query heads per kv head:
  //   q       = split_heads(x Wq^T + bq)                  (B, T, H, dk)
  //   k, v    = split_heads(x Wk^T + bk), ...             (B, T, Hkv, dk)
  //   q, k    = q_norm(q), k_norm(k)   with qk_norm only: RMSNorm over each head's dk values
  //   q, k    = rotate(q), rotate(k)   with rotary positions only, before their hooks
  //   k, v    = repeat_kv(k), ...      query head h reads kv head h / G: (B, T, H, dk) (no copy if G = 1)
  //   scores  = q k^T / sqrt(dk)                          (B, H, T, S)   (q k^T with attn_scale none)
  //   pattern = softmax(scores, -inf where mask is set)   (B, H, T, S)
  //   z       = pattern v                                 (B, T, H, dk)
  //   out     = merge_heads(z) Wo^T + bo                  (B, T, D)
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask = {},
                        const HookSite<T>& at = {}) const;

  int64_t n_heads, d_model, dk;
  int64_t n_kv_heads;  // key and value heads; query head h reads kv head h / (n_heads / n_kv_heads)
  Linear<T> wq, wk, wv, wo;
  // Local attention: query t sees keys in (t - window, t]; 0: every earlier key. The mask a forward is
  // given already says so (CausalLM::attention_mask); this is the layer's value for the KV cache and tools.
  int64_t window = 0;
  // Rotary positions: the dims of each head turned (0: none) and the base of their angles.
  int64_t rotary_dims = 0;
  double rotary_base = 10000;
  AttnScale attn_scale = AttnScale::sqrt_dk;
  // QK-norm: RMSNorms over each head's dk values of q and of k (weights (dk), shared by the heads,
  // parameters q_norm.weight and k_norm.weight); null without model.qk_norm.
  std::unique_ptr<RMSNorm<T>> q_norm, k_norm;
  // The factor on q k^T: 1 / sqrt(dk), or 1 with attn_scale none.
  T score_scale() const;
};

}  // namespace nn
