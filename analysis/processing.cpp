// Weight processing (see processing.h).
#include "analysis/processing.h"

#include <initializer_list>

namespace analysis {
namespace {

// A norm's weight w and bias b (each where it has one) folded into the Linear (W [out, in], bias) that
// reads it, W's rows centred when the norm centres its input (a constant per row then reads nothing).
template <typename T>
void fold(const nn::Norm<T>& norm, nn::Linear<T>& reader) {
  const int64_t out = reader.weight.size(0), in = reader.weight.size(1);
  T* W = reader.weight.data();
  const T* w = norm.weight.defined() ? norm.weight.data() : nullptr;
  const T* b = norm.bias.defined() ? norm.bias.data() : nullptr;
  for (int64_t o = 0; o < out; ++o) {
    double shift = 0, mean = 0;
    if (b) {
      for (int64_t i = 0; i < in; ++i) shift += double(W[o * in + i]) * double(b[i]);
      if (reader.bias.defined()) reader.bias.data()[o] = T(double(reader.bias.data()[o]) + shift);
    }
    for (int64_t i = 0; i < in; ++i) {
      if (w) W[o * in + i] = T(double(W[o * in + i]) * double(w[i]));
      mean += double(W[o * in + i]) / double(in);
    }
    if (norm.centres())
      for (int64_t i = 0; i < in; ++i) W[o * in + i] = T(double(W[o * in + i]) - mean);
  }
}

// The folded norm left as weight 1, bias 0.
template <typename T>
void finish_fold(nn::Norm<T>& norm) {
  if (norm.weight.defined())
    for (int64_t i = 0; i < norm.weight.numel(); ++i) norm.weight.data()[i] = T(1);
  if (norm.bias.defined())
    for (int64_t i = 0; i < norm.bias.numel(); ++i) norm.bias.data()[i] = T(0);
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

// wo.bias += Wo b_v and b_v = 0, b_v's kv head g read by query heads g * G .. (g + 1) * G - 1.
template <typename T>
void fold_value_bias(nn::MultiHeadAttention<T>& attn) {
  T* bv = attn.wv.bias.data();
  T* bo = attn.wo.bias.data();
  const T* Wo = attn.wo.weight.data();  // (d_model, n_heads * dk)
  const int64_t D = attn.d_model, dk = attn.dk, in = attn.n_heads * dk;
  const int64_t group = attn.n_heads / attn.n_kv_heads;
  for (int64_t o = 0; o < D; ++o) {
    double sum = 0;
    for (int64_t h = 0; h < attn.n_heads; ++h)
      for (int64_t d = 0; d < dk; ++d)
        sum += double(Wo[o * in + h * dk + d]) * double(bv[(h / group) * dk + d]);
    bo[o] = T(double(bo[o]) + sum);
  }
  for (int64_t i = 0; i < attn.wv.bias.numel(); ++i) bv[i] = T(0);
}

}  // namespace

template <typename T>
std::unique_ptr<nn::CausalLM<T>> processed_weights(const nn::CausalLM<T>& model, const Processing& steps,
                                                   ProcessingLog* log) {
  ag::Rng rng(0);  // the values are overwritten below
  // Tied embeddings are untied in the copy: the fold and the centring change the embedding and the
  // unembedding differently.
  nn::ModelShape shape = model.shape;
  shape.tie_embeddings = false;
  auto out = std::make_unique<nn::CausalLM<T>>(shape, rng);
  const auto from = model.named_parameters();
  const auto to = out->named_parameters();
  for (size_t i = 0, j = 0; i < to.size(); ++i) {
    if (model.shape.tie_embeddings && to[i].tensor == &out->lm_head.weight) {
      to[i].tensor->assign(model.lm_head.weight.to_vector());
      continue;
    }
    to[i].tensor->assign(from[j++].tensor->to_vector());
  }
  nn::CausalLM<T>& m = *out;
  auto note = [log](const char* step, const std::string& what) {
    if (log) log->emplace_back(step, what);
  };
  const bool norms = m.ln_f->normalises(), centring = m.ln_f->centres();
  if (steps.fold_ln) {
    // The identity norm (kind none) folds nothing.
    auto fold_all = [](nn::Norm<T>& norm, std::initializer_list<nn::Linear<T>*> readers) {
      if (!norm.normalises()) return;
      for (nn::Linear<T>* reader : readers)
        if (reader) fold(norm, *reader);  // a null reader: the gate of an MLP without one
      finish_fold(norm);
    };
    for (auto& block : m.blocks) {
      fold_all(*block->ln1, {&block->attn.wq, &block->attn.wk, &block->attn.wv});
      if (block->mlp) fold_all(*block->ln2, {&block->mlp->fc1, block->mlp->gate.get()});
    }
    fold_all(*m.ln_f, {&m.lm_head});
    note("fold_ln", !norms ? "skipped: the model has no norms"
                    : centring
                        ? "the norms' weights and biases folded into their readers, rows centred"
                        : "the norms' weights folded into their readers (RMSNorm: no bias, no centring)");
  }
  // Writers to the stream, centred over d_model, when every reader of the stream (each a norm of the same
  // kind) removes its mean; otherwise the stream's mean is read and stays.
  if (steps.center_writing_weights) {
    if (centring) {
      centre(m.tok_emb.weight, 1);
      if (m.pos_emb) centre(m.pos_emb->weight, 1);
      for (auto& block : m.blocks) {
        centre(block->attn.wo.weight, 0);
        if (block->attn.wo.bias.defined()) centre(block->attn.wo.bias, 1);
        if (block->mlp) {
          centre(block->mlp->fc2.weight, 0);
          if (block->mlp->fc2.bias.defined()) centre(block->mlp->fc2.bias, 1);
        }
      }
    }
    const std::string writers = m.pos_emb ? "tok_emb, pos_emb, wo and fc2" : "tok_emb, wo and fc2";
    note("center_writing_weights", centring ? writers + " centred over d_model"
                                            : "skipped: the norms do not centre (the stream's mean is read)");
  }
  // The unembedding, centred over the vocabulary: a constant added to every logit changes no probability,
  // unless the logits are soft-capped (tanh is not shift-invariant), when it stays as it is.
  if (steps.center_unembed) {
    const bool capped = m.shape.logit_softcap > 0;
    if (!capped) {
      centre(m.lm_head.weight, 0);
      if (m.lm_head.bias.defined()) centre(m.lm_head.bias, 1);
    }
    note("center_unembed", capped ? "skipped: logit_softcap (tanh is not shift-invariant)"
                                  : "lm_head centred over the vocabulary");
  }
  // After the centring: Wo's columns are centred, so Wo b_v is too.
  if (steps.fold_value_biases) {
    const bool biases = m.blocks.empty() || m.blocks.front()->attn.wv.bias.defined();
    if (biases)
      for (auto& block : m.blocks) fold_value_bias(block->attn);
    note("fold_value_biases", biases ? "wv.bias folded into wo.bias" : "skipped: the model has no biases");
  }
  return out;
}

template std::unique_ptr<nn::CausalLM<float>> processed_weights<float>(const nn::CausalLM<float>&,
                                                                       const Processing&, ProcessingLog*);
template std::unique_ptr<nn::CausalLM<double>> processed_weights<double>(const nn::CausalLM<double>&,
                                                                         const Processing&, ProcessingLog*);

}  // namespace analysis
