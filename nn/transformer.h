// The pre-LayerNorm GPT of docs/architecture.md: TransformerBlock and CausalLM.
//   h = tok_emb[tokens] + pos_emb[positions]   (tok_emb[tokens] alone with rotary or no positions)
//   per block: h = h + attn(ln1(h));  h = h + mlp(ln2(h))   (no ln2 and mlp if attention_only)
//   logits = lm_head(ln_f(h))
// shape.parallel: per block h = h + attn(ln1(h)) + mlp(ln2(h)), both norms of the block's input;
// shape.tie_embeddings: lm_head's weight is tok_emb.weight; shape.logit_softcap c > 0: logits = c
// tanh(logits/c). ln1, ln2 and ln_f are norms of shape.norm (nn::Norm); of kind none each is the identity.
// Parameter names (and so checkpoint names) follow docs/architecture.md's table through the Module registry.
// The modules' forwards are the reference: plain ops, a hook at every point of nn/hook_points.h. Training
// runs nn/training_forward.cpp, the same function with fused ops and no hooks; CausalLM::forward picks it
// when it is given no Hooks, and tests/nn/test_hooks.cpp holds the two equal. forward_cached runs the
// training forward's ops one new position at a time, over a key/value cache (nn/kv_cache.h).
#pragma once

#include <memory>

#include "nn/attention.h"
#include "nn/kv_cache.h"
#include "nn/model_shape.h"

namespace nn {

template <typename T>
class TransformerBlock : public Module<T> {
 public:
  // A block of a model of this shape (its d_model, n_heads, d_ff, attention_only, norm, activation and
  // bias).
  TransformerBlock(const ModelShape& shape, ag::Rng& rng, size_t layer = 0);
  // x (B, T, D) -> (B, T, D); `at` runs the hooks of this block (prefix "blocks.L.").
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask, const HookSite<T>& at = {}) const;

  std::unique_ptr<Norm<T>> ln1;
  MultiHeadAttention<T> attn;
  std::unique_ptr<Norm<T>> ln2;  // null when attention_only
  std::unique_ptr<MLP<T>> mlp;   // null when attention_only
  bool parallel = false;         // shape.parallel: ln2 reads resid_pre, not resid_mid
};

template <typename T>
class CausalLM : public Module<T> {
 public:
  // Parameters are drawn from rng in registration order: tok_emb, pos_emb (learned positions only), blocks,
  // ln_f, lm_head.
  CausalLM(const ModelShape& shape, ag::Rng& rng);

  // ids (B*T, row-major) -> logits (B, T, vocab). The causal mask is always applied; is_padding (B*T, 1 =
  // padding key) additionally hides padded keys. With hooks (any Hooks object, even an empty one) this is
  // the reference forward, whose hooks read or replace activations (nn/hooks.h); a hook at a point this
  // model does not have is an error (std::invalid_argument naming it). Without, it is the training forward
  // (nn/training_forward.h): the same numbers up to float rounding.
  ag::Tensor<T> forward(const std::vector<int32_t>& ids, int64_t batch, int64_t t,
                        const std::vector<uint8_t>& is_padding = {}, Hooks<T>* hooks = nullptr) const;
  // Incremental decoding: ids (n >= 1 tokens, one sequence) read at positions cache.size() ..
  // cache.size() + n - 1, after the positions the cache holds; returns their logits (1, n, vocab) and
  // appends their keys and values to the cache. Each position costs its own work per layer, with
  // attention over the cached keys: feeding a sequence a token at a time is O(T) forwards of one position,
  // not T full forwards. No graph, no hooks. The logits are forward()'s without hooks (the training forward)
  // on the whole sequence so far: the same ops on the same rows, to the bit when rows of d_model and d_ff
  // values fill whole 64-byte lines, else to float rounding (tests/nn/test_kv_cache.cpp). Throws
  // std::invalid_argument for no ids, an id outside the vocabulary, a cache made for another shape, or
  // more positions than max_len; the cache is then unchanged.
  ag::Tensor<T> forward_cached(const std::vector<int32_t>& ids, KVCache<T>& cache) const;
  // Every hook point of this model, in forward order.
  std::vector<std::string> hook_points() const;

  // The two forwards' shared start: tok_emb[ids] + pos_emb[0..t) (B, T, D; tok_emb[ids] alone without
  // learned positions), and the attention mask, causal
  // (T, T) or with padding (B, 1, T, T), local with a window > 0 (causal_mask).
  ag::Tensor<T> embed(const std::vector<int32_t>& ids, int64_t batch, int64_t t) const;
  ag::Tensor<T> attention_mask(int64_t batch, int64_t t, const std::vector<uint8_t>& is_padding,
                               int64_t window = 0) const;
  // Each block's mask: attention_mask with the block's window, one tensor per distinct window.
  std::vector<ag::Tensor<T>> attention_masks(int64_t batch, int64_t t,
                                             const std::vector<uint8_t>& is_padding) const;

  ModelShape shape;
  Embedding<T> tok_emb;
  std::unique_ptr<Embedding<T>> pos_emb;  // null unless shape.positions is learned (has_pos_emb)
  std::vector<std::unique_ptr<TransformerBlock<T>>> blocks;
  std::unique_ptr<Norm<T>> ln_f;
  Linear<T> lm_head;  // tie_embeddings: its weight is tok_emb.weight, and only its bias is its own
};

}  // namespace nn
