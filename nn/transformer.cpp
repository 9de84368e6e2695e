#include "nn/transformer.h"

#include <algorithm>

namespace nn {

template <typename T>
TransformerBlock<T>::TransformerBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, bool attention_only,
                                      ag::Rng& rng)
    : ln1(d_model), attn(d_model, n_heads, rng) {
  this->register_module("ln1", &ln1);
  this->register_module("attn", &attn);
  if (!attention_only) {
    ln2 = std::make_unique<LayerNorm<T>>(d_model);
    mlp = std::make_unique<MLP<T>>(d_model, d_ff, rng);
    this->register_module("ln2", ln2.get());
    this->register_module("mlp", mlp.get());
  }
}

template <typename T>
ag::Tensor<T> TransformerBlock<T>::forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask, Hooks<T>* hooks,
                                           const std::string& prefix) const {
  // The residual adds happen inside Wo's and fc2's products, so their outputs are never tensors of their
  // own (less memory, one pass fewer), except where a hook at attn.out or mlp.out must see them alone. ln2
  // is recomputed in fc1's backward rather than kept.
  const ag::Tensor<T> resid_pre = run_hook(hooks, prefix, "resid_pre", x);
  ag::Tensor<T> h = run_hook(hooks, prefix, "resid_mid",
                             attn.forward(ln1.forward(resid_pre), mask, hooks, prefix, resid_pre));
  if (mlp) {
    if (!hooks || !hooks->has(prefix + "mlp.out"))
      h = mlp->forward_normed(*ln2, h, h);
    else
      h = ag::add(h, hooks->run(prefix + "mlp.out", mlp->forward_normed(*ln2, h)));
  }
  return run_hook(hooks, prefix, "resid_post", h);
}

namespace {
// Built in the member initialiser list so the generator is drawn in docs/architecture.md's order.
template <typename T>
std::vector<std::unique_ptr<TransformerBlock<T>>> make_blocks(const ModelShape& s, ag::Rng& rng) {
  std::vector<std::unique_ptr<TransformerBlock<T>>> blocks;
  for (int64_t i = 0; i < s.n_layers; ++i)
    blocks.push_back(
        std::make_unique<TransformerBlock<T>>(s.d_model, s.n_heads, s.d_ff, s.attention_only, rng));
  return blocks;
}
}  // namespace

template <typename T>
CausalLM<T>::CausalLM(const ModelShape& s, ag::Rng& rng)
    : shape(s),
      tok_emb(s.vocab, s.d_model, rng),
      pos_emb(s.max_len, s.d_model, rng),
      blocks(make_blocks<T>(s, rng)),
      ln_f(s.d_model),
      lm_head(s.d_model, s.vocab, rng) {
  this->register_module("tok_emb", &tok_emb);
  this->register_module("pos_emb", &pos_emb);
  for (size_t i = 0; i < blocks.size(); ++i)
    this->register_module("blocks." + std::to_string(i), blocks[i].get());
  this->register_module("ln_f", &ln_f);
  this->register_module("lm_head", &lm_head);
}

template <typename T>
std::vector<std::string> CausalLM<T>::hook_points() const {
  std::vector<std::string> points;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const std::string p = block_prefix(l);
    for (const char* name : {"resid_pre", "attn.pattern", "attn.z", "attn.out", "resid_mid"})
      points.push_back(p + name);
    if (blocks[l]->mlp) points.push_back(p + "mlp.out");
    points.push_back(p + "resid_post");
  }
  points.push_back("ln_f.out");
  points.push_back("logits");
  return points;
}

template <typename T>
ag::Tensor<T> CausalLM<T>::forward(const std::vector<int32_t>& ids, int64_t batch, int64_t t,
                                   const std::vector<uint8_t>& is_padding, Hooks<T>* hooks) const {
  if (t < 1 || t > shape.max_len)
    throw std::invalid_argument("CausalLM: sequence length " + std::to_string(t) + " outside 1.." +
                                std::to_string(shape.max_len));
  if (hooks) {
    const std::vector<std::string> known = hook_points();
    for (const std::string& p : hooks->points())
      if (std::find(known.begin(), known.end(), p) == known.end())
        throw std::invalid_argument("hook " + p + ": no such point in this model (blocks.0.." +
                                    std::to_string(blocks.size() - 1) + ", see nn/hooks.h)");
  }
  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(i);
  // (B, T, D) + (T, D): positions broadcast over the batch.
  ag::Tensor<T> x = ag::add(tok_emb.forward(ids, {batch, t}), pos_emb.forward(positions, {t}));
  ag::Tensor<T> mask = causal_mask<T>(t);                                                // (T, T)
  if (!is_padding.empty()) mask = ag::add(mask, padding_mask<T>(is_padding, batch, t));  // (B, 1, T, T)
  for (size_t l = 0; l < blocks.size(); ++l)
    x = blocks[l]->forward(x, mask, hooks, hooks ? block_prefix(l) : std::string());
  // ln_f's output is recomputed in lm_head's backward rather than kept, unless a hook must see it.
  const ag::Tensor<T> logits = hooks && hooks->has("ln_f.out")
                                   ? lm_head.forward(hooks->run("ln_f.out", ln_f.forward(x)))
                                   : lm_head.forward_normed(ln_f, x);
  return run_hook(hooks, "", "logits", logits);
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;
template class CausalLM<float>;
template class CausalLM<double>;

}  // namespace nn
