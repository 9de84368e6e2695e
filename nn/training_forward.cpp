#include "nn/training_forward.h"

#include <cmath>
#include <stdexcept>

namespace nn {

template <typename T>
ag::Tensor<T> attention_input(const TransformerBlock<T>& block, const ag::Tensor<T>& h) {
  return block.ln1->forward_fused(h);
}

template <typename T>
ag::Tensor<T> mlp_residual(const TransformerBlock<T>& block, const ag::Tensor<T>& resid_mid,
                           const ag::Tensor<T>& block_input) {
  if (!block.mlp) return resid_mid;
  const MLP<T>& mlp = *block.mlp;
  const ag::Tensor<T>& in = block.parallel ? block_input : resid_mid;  // what ln2 reads
  if (mlp.gate) {  // ln2's output feeds two products: kept, not recomputed in each
    const ag::Tensor<T> x = block.ln2->forward_fused(in);
    const ag::Tensor<T> gate = ag::linear(x, mlp.gate->weight, mlp.gate->bias);
    const ag::Tensor<T> up = ag::linear(x, mlp.fc1.weight, mlp.fc1.bias);
    return ag::linear(activate(mlp.activation, gate) * up, mlp.fc2.weight, mlp.fc2.bias,
                      /*residual=*/resid_mid);
  }
  const ag::Tensor<T> pre = block.ln2->forward_linear(in, mlp.fc1.weight, mlp.fc1.bias);
  switch (mlp.activation) {
    case Activation::gelu:
      return ag::gelu_linear(pre, mlp.fc2.weight, mlp.fc2.bias, /*residual=*/resid_mid);
    case Activation::gelu_erf:
    case Activation::relu:
    case Activation::relu2:
    case Activation::swiglu:  // gated: handled above
    case Activation::geglu:
      return ag::linear(activate(mlp.activation, pre), mlp.fc2.weight, mlp.fc2.bias, /*residual=*/resid_mid);
  }
  throw std::logic_error("mlp_residual: unknown activation");
}

template <typename T>
ag::Tensor<T> positioned(const MultiHeadAttention<T>& attn, const ag::Tensor<T>& y, int64_t first_position,
                         const RMSNorm<T>* norm) {
  ag::Tensor<T> out = y;
  if (norm) {  // over each head's dk values: (B, T, H, dk) for the op, back to (B, T, D)
    const ag::Shape shape = y.shape();
    out = ag::reshape(norm->forward_fused(ag::reshape(y, {y.size(0), y.size(1), attn.n_heads, attn.dk})),
                      shape);
  }
  if (!attn.rotary_dims) return out;
  return ag::rotary(out, attn.dk, attn.rotary_dims, attn.rotary_base, first_position);
}

template <typename T>
ag::Tensor<T> soft_cap(const ag::Tensor<T>& logits, double cap) {
  if (cap <= 0) return logits;
  return ag::scale(ag::tanh(ag::scale(logits, T(1 / cap))), T(cap));
}

template <typename T>
ag::Tensor<T> unembed(const CausalLM<T>& model, const ag::Tensor<T>& h) {
  return soft_cap(model.ln_f->forward_linear(h, model.lm_head.weight, model.lm_head.bias),
                  model.shape.logit_softcap);
}

namespace {

// h + attn(ln1(h)): a block's first half, fused.
template <typename T>
ag::Tensor<T> attention_residual(const TransformerBlock<T>& block, const ag::Tensor<T>& h,
                                 const ag::Tensor<T>& mask) {
  const MultiHeadAttention<T>& a = block.attn;
  const ag::Tensor<T> x = attention_input(block, h);
  const ag::Tensor<T> z =
      ag::attention(positioned(a, ag::linear(x, a.wq.weight, a.wq.bias), 0, a.q_norm.get()),
                    positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), 0, a.k_norm.get()),
                    ag::linear(x, a.wv.weight, a.wv.bias), a.n_heads, mask,
                    a.score_scale());  // (B, T, D): the heads side by side
  return ag::linear(z, a.wo.weight, a.wo.bias, /*residual=*/h);
}

}  // namespace

template <typename T>
ag::Tensor<T> training_forward(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                               int64_t t, const std::vector<uint8_t>& is_padding) {
  ag::Tensor<T> h = model.embed(ids, batch, t);
  const ag::Tensor<T> mask = model.attention_mask(batch, t, is_padding);
  for (const auto& block : model.blocks) h = mlp_residual(*block, attention_residual(*block, h, mask), h);
  return unembed(model, h);
}

template <typename T>
ag::Tensor<T> training_forward_rows(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                                    int64_t t, const std::vector<int64_t>& rows) {
  ag::Tensor<T> h = model.embed(ids, batch, t);
  const ag::Tensor<T> mask = model.attention_mask(batch, t, {});
  const size_t last = model.blocks.size() - 1;
  for (size_t l = 0; l < last; ++l)
    h = mlp_residual(*model.blocks[l], attention_residual(*model.blocks[l], h, mask), h);
  const ag::Tensor<T> resid_mid = attention_residual(*model.blocks[last], h, mask);  // (B, T, D)
  // Parallel: the last MLP reads the block input's rows too.
  const ag::Tensor<T> input_rows = model.blocks[last]->parallel ? ag::select_rows(h, rows) : ag::Tensor<T>();
  return unembed(model,
                 mlp_residual(*model.blocks[last], ag::select_rows(resid_mid, rows), input_rows));  // (R, V)
}

#define ATTOGRAD_INSTANTIATE(T)                                                                             \
  template ag::Tensor<T> training_forward<T>(const CausalLM<T>&, const std::vector<int32_t>&, int64_t,      \
                                             int64_t, const std::vector<uint8_t>&);                         \
  template ag::Tensor<T> training_forward_rows<T>(const CausalLM<T>&, const std::vector<int32_t>&, int64_t, \
                                                  int64_t, const std::vector<int64_t>&);                    \
  template ag::Tensor<T> attention_input<T>(const TransformerBlock<T>&, const ag::Tensor<T>&);              \
  template ag::Tensor<T> positioned<T>(const MultiHeadAttention<T>&, const ag::Tensor<T>&, int64_t,         \
                                       const RMSNorm<T>*);                                                  \
  template ag::Tensor<T> mlp_residual<T>(const TransformerBlock<T>&, const ag::Tensor<T>&,                  \
                                         const ag::Tensor<T>&);                                             \
  template ag::Tensor<T> soft_cap<T>(const ag::Tensor<T>&, double);                                         \
  template ag::Tensor<T> unembed<T>(const CausalLM<T>&, const ag::Tensor<T>&);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace nn
