// Weight processing (see processing.h).
#include "study/processing.h"

namespace study {
namespace {

// LayerNorm (w, b) folded into the Linear (W [out, in], bias) that reads it, W's rows centred; the
// LayerNorm left as weight 1, bias 0.
template <typename T>
void fold(nn::LayerNorm<T>& ln, nn::Linear<T>& reader) {
  const int64_t out = reader.weight.size(0), in = reader.weight.size(1);
  T* W = reader.weight.data();
  T* w = ln.weight.data();
  T* b = ln.bias.data();
  for (int64_t o = 0; o < out; ++o) {
    double shift = 0, mean = 0;
    for (int64_t i = 0; i < in; ++i) shift += double(W[o * in + i]) * double(b[i]);
    if (reader.bias.defined()) reader.bias.data()[o] = T(double(reader.bias.data()[o]) + shift);
    for (int64_t i = 0; i < in; ++i) {
      W[o * in + i] = T(double(W[o * in + i]) * double(w[i]));
      mean += double(W[o * in + i]) / double(in);
    }
    for (int64_t i = 0; i < in; ++i) W[o * in + i] = T(double(W[o * in + i]) - mean);
  }
}

template <typename T>
void finish_fold(nn::LayerNorm<T>& ln) {
  for (int64_t i = 0; i < ln.weight.numel(); ++i) ln.weight.data()[i] = T(1), ln.bias.data()[i] = T(0);
}

// Each column of W (rows x cols) minus its mean over the rows (axis 0), or each row minus its mean over
// the columns (axis 1).
template <typename T>
void centre(ag::Tensor<T>& W, int axis) {
  const int64_t rows = W.dim() == 1 ? 1 : W.size(0), cols = W.size(-1);
  T* d = W.data();
  if (axis == 1) {
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0;
      for (int64_t c = 0; c < cols; ++c) mean += double(d[r * cols + c]) / double(cols);
      for (int64_t c = 0; c < cols; ++c) d[r * cols + c] = T(double(d[r * cols + c]) - mean);
    }
  } else {
    for (int64_t c = 0; c < cols; ++c) {
      double mean = 0;
      for (int64_t r = 0; r < rows; ++r) mean += double(d[r * cols + c]) / double(rows);
      for (int64_t r = 0; r < rows; ++r) d[r * cols + c] = T(double(d[r * cols + c]) - mean);
    }
  }
}

}  // namespace

template <typename T>
std::unique_ptr<nn::CausalLM<T>> processed_weights(const nn::CausalLM<T>& model) {
  ag::Rng rng(0);  // the values are overwritten below
  auto out = std::make_unique<nn::CausalLM<T>>(model.shape, rng);
  const auto from = model.named_parameters();
  const auto to = out->named_parameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].tensor->assign(from[i].tensor->to_vector());
  nn::CausalLM<T>& m = *out;
  // Without LayerNorm there is nothing to fold.
  for (auto& block : m.blocks) {
    if (block->ln1) {
      for (nn::Linear<T>* reader : {&block->attn.wq, &block->attn.wk, &block->attn.wv})
        fold(*block->ln1, *reader);
      finish_fold(*block->ln1);
    }
    if (block->ln2) {
      fold(*block->ln2, block->mlp->fc1);
      finish_fold(*block->ln2);
    }
  }
  if (m.ln_f) {
    fold(*m.ln_f, m.lm_head);
    finish_fold(*m.ln_f);
  }
  // Writers to the stream, centred over d_model.
  centre(m.tok_emb.weight, 1);
  centre(m.pos_emb.weight, 1);
  for (auto& block : m.blocks) {
    centre(block->attn.wo.weight, 0);
    if (block->attn.wo.bias.defined()) centre(block->attn.wo.bias, 1);
    if (block->mlp) {
      centre(block->mlp->fc2.weight, 0);
      if (block->mlp->fc2.bias.defined()) centre(block->mlp->fc2.bias, 1);
    }
  }
  // The unembedding, centred over the vocabulary.
  centre(m.lm_head.weight, 0);
  if (m.lm_head.bias.defined()) centre(m.lm_head.bias, 1);
  return out;
}

template std::unique_ptr<nn::CausalLM<float>> processed_weights<float>(const nn::CausalLM<float>&);
template std::unique_ptr<nn::CausalLM<double>> processed_weights<double>(const nn::CausalLM<double>&);

}  // namespace study
