// The pre-LayerNorm GPT of docs/architecture.md: TransformerBlock and CausalLM.
//   x = tok_emb[tokens] + pos_emb[positions]
//   per block: x = x + Wo(MHA(ln1(x)));  x = x + fc2(gelu_tanh(fc1(ln2(x))))   (no ln2/mlp if attention_only)
//   logits = lm_head(ln_f(x))
// Parameter names (and so checkpoint names) follow docs/architecture.md's table through the Module registry.
// Forward takes optional activation hooks (nn/hooks.h lists the points); without them it is the training
// path.
#pragma once

#include <memory>

#include "nn/attention.h"
#include "nn/model_shape.h"

namespace nn {

template <typename T>
class TransformerBlock : public Module<T> {
 public:
  TransformerBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, bool attention_only, ag::Rng& rng);
  // x (B, T, D) -> (B, T, D); hook points under `prefix` ("blocks.L.").
  ag::Tensor<T> forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask, Hooks<T>* hooks = nullptr,
                        const std::string& prefix = "") const;

  LayerNorm<T> ln1;
  MultiHeadAttention<T> attn;
  std::unique_ptr<LayerNorm<T>> ln2;  // null when attention_only
  std::unique_ptr<MLP<T>> mlp;
};

template <typename T>
class CausalLM : public Module<T> {
 public:
  // Parameters are drawn from rng in registration order: tok_emb, pos_emb, blocks, ln_f, lm_head.
  CausalLM(const ModelShape& shape, ag::Rng& rng);

  // ids (B*T, row-major) -> logits (B, T, vocab). The causal mask is always applied; is_padding (B*T, 1 =
  // padding key) additionally hides padded keys. hooks: read or replace activations (nn/hooks.h); a hook
  // at a point this model does not have is an error (std::invalid_argument naming it).
  ag::Tensor<T> forward(const std::vector<int32_t>& ids, int64_t batch, int64_t t,
                        const std::vector<uint8_t>& is_padding = {}, Hooks<T>* hooks = nullptr) const;
  // Every hook point of this model, in forward order.
  std::vector<std::string> hook_points() const;

  ModelShape shape;
  Embedding<T> tok_emb, pos_emb;
  std::vector<std::unique_ptr<TransformerBlock<T>>> blocks;
  LayerNorm<T> ln_f;
  Linear<T> lm_head;
};

}  // namespace nn
