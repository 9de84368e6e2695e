#include "nn/transformer.h"

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
ag::Tensor<T> TransformerBlock<T>::forward(const ag::Tensor<T>& x, const ag::Tensor<T>& mask) {
  ag::Tensor<T> h = ag::add(x, attn.forward(ln1.forward(x), mask));
  if (mlp) h = ag::add(h, mlp->forward(ln2->forward(h)));
  return h;
}

namespace {
// Built in the member initialiser list so the generator is drawn in DESIGN.md's order.
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
ag::Tensor<T> CausalLM<T>::forward(const std::vector<int32_t>& ids, int64_t batch, int64_t t,
                                   const std::vector<uint8_t>& is_padding) {
  if (t < 1 || t > shape.max_len)
    throw std::invalid_argument("CausalLM: sequence length " + std::to_string(t) + " outside 1.." +
                                std::to_string(shape.max_len));
  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(i);
  // (B, T, D) + (T, D): positions broadcast over the batch.
  ag::Tensor<T> x = ag::add(tok_emb.forward(ids, {batch, t}), pos_emb.forward(positions, {t}));
  ag::Tensor<T> mask = causal_mask<T>(t);                                                // (T, T)
  if (!is_padding.empty()) mask = ag::add(mask, padding_mask<T>(is_padding, batch, t));  // (B, 1, T, T)
  for (auto& block : blocks) x = block->forward(x, mask);
  return lm_head.forward(ln_f.forward(x));
}

template <typename T>
void CausalLM<T>::set_keep_attention(bool on) {
  for (auto& block : blocks) block->attn.keep_weights = on;
}

template <typename T>
std::vector<ag::Tensor<T>> CausalLM<T>::attention_weights() const {
  std::vector<ag::Tensor<T>> out;
  for (const auto& block : blocks) out.push_back(block->attn.last_weights);
  return out;
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;
template class CausalLM<float>;
template class CausalLM<double>;

}  // namespace nn
