#include "nn/transformer.h"

#include <algorithm>
#include <cmath>

#include "nn/training_forward.h"

namespace nn {

template <typename T>
TransformerBlock<T>::TransformerBlock(const ModelShape& s, ag::Rng& rng, size_t layer)
    : ln1(make_norm<T>(s.norm, s.d_model, s.norm_eps)), attn(s, rng, layer) {
  this->register_module("ln1", ln1.get());
  this->register_module("attn", &attn);
  if (!s.attention_only) {
    ln2 = make_norm<T>(s.norm, s.d_model, s.norm_eps);
    this->register_module("ln2", ln2.get());
    mlp = std::make_unique<MLP<T>>(s.d_model, s.d_ff, rng, s.activation, s.bias);
    this->register_module("mlp", mlp.get());
  }
  parallel = s.parallel;
}

template <typename T>
ag::Tensor<T> TransformerBlock<T>::forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask,
                                           const HookSite<T>& at) const {
  const ag::Tensor<T> resid_pre = at(Point::resid_pre, x);
  const ag::Tensor<T> attn_in = ln1->forward(resid_pre, at, Point::ln1_scale, Point::ln1_out);
  const ag::Tensor<T> resid_mid = at(Point::resid_mid, resid_pre + attn.forward(attn_in, mask, at));
  if (!mlp) return at(Point::resid_post, resid_mid);
  // Parallel (GPT-NeoX): the MLP reads the block's input, as attention does; resid_mid is still
  // resid_pre + attn.out, which only later blocks read.
  const ag::Tensor<T> mlp_in =
      ln2->forward(parallel ? resid_pre : resid_mid, at, Point::ln2_scale, Point::ln2_out);
  return at(Point::resid_post, resid_mid + mlp->forward(mlp_in, at));
}

namespace {
// Built in the member initialiser list so the generator is drawn in docs/architecture.md's order.
template <typename T>
std::vector<std::unique_ptr<TransformerBlock<T>>> make_blocks(const ModelShape& s, ag::Rng& rng) {
  std::vector<std::unique_ptr<TransformerBlock<T>>> blocks;
  for (int64_t i = 0; i < s.n_layers; ++i)
    blocks.push_back(std::make_unique<TransformerBlock<T>>(s, rng, static_cast<size_t>(i)));
  return blocks;
}
}  // namespace

template <typename T>
CausalLM<T>::CausalLM(const ModelShape& s, ag::Rng& rng)
    : shape(s),
      tok_emb(s.vocab, s.d_model, rng),
      pos_emb(has_pos_emb(s.positions) ? std::make_unique<Embedding<T>>(s.max_len, s.d_model, rng) : nullptr),
      blocks(make_blocks<T>(s, rng)),
      ln_f(make_norm<T>(s.norm, s.d_model, s.norm_eps)),
      lm_head(s.tie_embeddings ? Linear<T>(tok_emb.weight, s.bias)
                               : Linear<T>(s.d_model, s.vocab, rng, s.bias)) {
  this->register_module("tok_emb", &tok_emb);
  if (pos_emb) this->register_module("pos_emb", pos_emb.get());
  for (size_t i = 0; i < blocks.size(); ++i)
    this->register_module("blocks." + std::to_string(i), blocks[i].get());
  this->register_module("ln_f", ln_f.get());
  this->register_module("lm_head", &lm_head);
}

template <typename T>
std::vector<std::string> CausalLM<T>::hook_points() const {
  return hook_point_names(shape);
}

template <typename T>
ag::Tensor<T> CausalLM<T>::embed(const std::vector<int32_t>& ids, int64_t batch, int64_t t) const {
  if (!pos_emb) return tok_emb.forward(ids, {batch, t});  // positions enter attention, if anywhere
  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(i);
  // (B, T, D) + (T, D): positions broadcast over the batch.
  return ag::add(tok_emb.forward(ids, {batch, t}), pos_emb->forward(positions, {t}));
}

template <typename T>
ag::Tensor<T> CausalLM<T>::attention_mask(int64_t batch, int64_t t, const std::vector<uint8_t>& is_padding,
                                          int64_t window) const {
  ag::Tensor<T> mask = causal_mask<T>(t, window);                                        // (T, T)
  if (!is_padding.empty()) mask = ag::add(mask, padding_mask<T>(is_padding, batch, t));  // (B, 1, T, T)
  return mask;
}

template <typename T>
std::vector<ag::Tensor<T>> CausalLM<T>::attention_masks(int64_t batch, int64_t t,
                                                        const std::vector<uint8_t>& is_padding) const {
  std::vector<ag::Tensor<T>> masks(blocks.size());
  for (size_t l = 0; l < blocks.size(); ++l) {
    for (size_t e = 0; e < l && !masks[l].defined(); ++e)
      if (blocks[e]->attn.window == blocks[l]->attn.window) masks[l] = masks[e];
    if (!masks[l].defined()) masks[l] = attention_mask(batch, t, is_padding, blocks[l]->attn.window);
  }
  return masks;
}

template <typename T>
ag::Tensor<T> CausalLM<T>::forward(const std::vector<int32_t>& ids, int64_t batch, int64_t t,
                                   const std::vector<uint8_t>& is_padding, Hooks<T>* hooks) const {
  if (t < 1 || t > shape.max_len)
    throw std::invalid_argument("CausalLM: sequence length " + std::to_string(t) + " outside 1.." +
                                std::to_string(shape.max_len));
  if (!hooks) return training_forward(*this, ids, batch, t, is_padding);
  const std::vector<std::string> known = hook_point_names(shape, true);
  for (const std::string& p : hooks->points())
    if (std::find(known.begin(), known.end(), p) == known.end())
      throw std::invalid_argument("hook " + p + ": no such point in this model (" +
                                  hook_point_summary(shape) + ")");
  const std::vector<ag::Tensor<T>> masks = attention_masks(batch, t, is_padding);
  const HookSite<T> at(hooks);
  ag::Tensor<T> h = at(Point::embed, tok_emb.forward(ids, {batch, t}));
  if (pos_emb) {  // learned positions; otherwise they enter attention, if anywhere
    std::vector<int32_t> positions(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(i);
    // pos_embed (T, D) broadcast to (B, T, D) so that a hook sees one row per batch entry; 0 + x is x, so
    // the sum is embed()'s to the bit.
    h = ag::add(h, at(Point::pos_embed, ag::add(ag::Tensor<T>::zeros({batch, t, shape.d_model}),
                                                pos_emb->forward(positions, {t}))));
  }
  for (size_t l = 0; l < blocks.size(); ++l)
    h = blocks[l]->forward(h, masks[l], HookSite<T>(hooks, block_prefix(l)));
  const ag::Tensor<T> final = ln_f->forward(h, at, Point::ln_f_scale, Point::ln_f_out);
  if (const auto* splice = at.spliced(Point::logits)) return at(Point::logits, (*splice)(final));
  return at(Point::logits, soft_cap(lm_head.forward(final), shape.logit_softcap));
}

template <typename T>
ag::Tensor<T> CausalLM<T>::forward_cached(const std::vector<int32_t>& ids, KVCache<T>& cache) const {
  const int64_t n = static_cast<int64_t>(ids.size()), past = cache.size();
  if (n < 1) throw std::invalid_argument("CausalLM::forward_cached: no tokens");
  if (!cache.fits(shape))
    throw std::invalid_argument("CausalLM::forward_cached: the cache was made for another model shape");
  if (past + n > shape.max_len)
    throw std::invalid_argument("CausalLM::forward_cached: " + std::to_string(n) + " new tokens after " +
                                std::to_string(past) + " cached would make " + std::to_string(past + n) +
                                " positions, but max_len is " + std::to_string(shape.max_len));
  ag::NoGradScope no_grad;
  // The training forward's ops (nn/training_forward.cpp) on the n new rows: embed() for positions
  // past .. past + n - 1, then each block with attention over the cache instead of ag::attention.
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(past + i);
  ag::Tensor<T> h = pos_emb ? ag::add(tok_emb.forward(ids, {1, n}), pos_emb->forward(positions, {n}))
                            : tok_emb.forward(ids, {1, n});  // (1, n, D)
  for (size_t l = 0; l < blocks.size(); ++l) {
    const TransformerBlock<T>& block = *blocks[l];
    const MultiHeadAttention<T>& a = block.attn;
    const ag::Tensor<T> x = attention_input(block, h);
    // Rotary positions: the cache holds the keys turned by their positions, past .. past + n - 1.
    const ag::Tensor<T> k = positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), past, a.k_norm.get());
    const ag::Tensor<T> v = ag::linear(x, a.wv.weight, a.wv.bias);
    cache.write(static_cast<int64_t>(l), k.data(), v.data(), n);
    const ag::Tensor<T> q = positioned(a, ag::linear(x, a.wq.weight, a.wq.bias), past, a.q_norm.get());
    ag::Tensor<T> z = ag::Tensor<T>::empty({1, n, shape.d_model});  // the heads side by side
    cache.attend(static_cast<int64_t>(l), q.data(), n, a.score_scale(), z.data(), a.window);
    h = mlp_residual(block, ag::linear(z, a.wo.weight, a.wo.bias, /*residual=*/h), /*block_input=*/h);
  }
  ag::Tensor<T> logits = unembed(*this, h);
  cache.advance(n);
  return logits;
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;
template class CausalLM<float>;
template class CausalLM<double>;

}  // namespace nn
