#include "nn/training_forward.h"

#include <cmath>

namespace nn {

namespace {

// h + attn(ln1(h)), then h + mlp(ln2(h)): one block, fused.
template <typename T>
ag::Tensor<T> block_forward(const TransformerBlock<T>& block, const ag::Tensor<T>& h,
                            const ag::Tensor<T>& mask) {
  const MultiHeadAttention<T>& a = block.attn;
  const ag::Tensor<T> x = ag::layer_norm(h, block.ln1.weight, block.ln1.bias, block.ln1.eps);
  const ag::Tensor<T> z =
      ag::attention(ag::linear(x, a.wq.weight, a.wq.bias), ag::linear(x, a.wk.weight, a.wk.bias),
                    ag::linear(x, a.wv.weight, a.wv.bias), a.n_heads, mask,
                    T(1) / std::sqrt(T(a.dk)));  // (B, T, D): the heads side by side
  const ag::Tensor<T> resid_mid = ag::linear(z, a.wo.weight, a.wo.bias, /*residual=*/h);
  if (!block.mlp) return resid_mid;
  const LayerNorm<T>& ln2 = *block.ln2;
  const MLP<T>& mlp = *block.mlp;
  const ag::Tensor<T> pre =
      ag::layer_norm_linear(resid_mid, ln2.weight, ln2.bias, mlp.fc1.weight, mlp.fc1.bias, ln2.eps);
  return ag::gelu_linear(pre, mlp.fc2.weight, mlp.fc2.bias, /*residual=*/resid_mid);
}

}  // namespace

template <typename T>
ag::Tensor<T> training_forward(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                               int64_t t, const std::vector<uint8_t>& is_padding) {
  ag::Tensor<T> h = model.embed(ids, batch, t);
  const ag::Tensor<T> mask = model.attention_mask(batch, t, is_padding);
  for (const auto& block : model.blocks) h = block_forward(*block, h, mask);
  return ag::layer_norm_linear(h, model.ln_f.weight, model.ln_f.bias, model.lm_head.weight,
                               model.lm_head.bias, model.ln_f.eps);
}

template ag::Tensor<float> training_forward<float>(const CausalLM<float>&, const std::vector<int32_t>&,
                                                   int64_t, int64_t, const std::vector<uint8_t>&);
template ag::Tensor<double> training_forward<double>(const CausalLM<double>&, const std::vector<int32_t>&,
                                                     int64_t, int64_t, const std::vector<uint8_t>&);

}  // namespace nn
