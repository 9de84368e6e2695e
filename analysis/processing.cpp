// Weight processing (see processing.h).
#include "analysis/processing.h"

#include "nn/model_view.h"

namespace analysis {
namespace {

// A norm's weight w and bias b (each where it has one) folded into the Linear (W [out, in], bias) that
// reads it, W's rows centred when the norm centres its input (a constant per row then reads nothing).
template <typename T>
void fold(const nn::NormView<T>& norm, nn::LinearView<T>& reader) {
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
    if (norm.centres)
      for (int64_t i = 0; i < in; ++i) W[o * in + i] = T(double(W[o * in + i]) - mean);
  }
}

// The folded norm left as weight 1, bias 0.
template <typename T>
void finish_fold(nn::NormView<T>& norm) {
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

// The output map's bias += W_O b_v and b_v = 0, b_v's kv head read by its query heads (kv_head).
template <typename T>
void fold_value_bias(nn::AttentionView<T>& attn) {
  T* bv = attn.value.bias.data();
  T* bo = attn.output.bias.data();
  const T* Wo = attn.output.weight.data();  // (d_model, n_heads * dk)
  const int64_t D = attn.d_model, dk = attn.dk, in = attn.n_heads * dk;
  for (int64_t o = 0; o < D; ++o) {
    double sum = 0;
    for (int64_t h = 0; h < attn.n_heads; ++h)
      for (int64_t d = 0; d < dk; ++d)
        sum += double(Wo[o * in + attn.output_column(h) + d]) * double(bv[attn.key_row(h) + d]);
    bo[o] = T(double(bo[o]) + sum);
  }
  for (int64_t i = 0; i < attn.value.bias.numel(); ++i) bv[i] = T(0);
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
  nn::ModelView<T> v = nn::view(*out);
  const std::string unembedding = v.unembed.name + ".weight";  // the copy's own, untied
  for (size_t i = 0, j = 0; i < to.size(); ++i) {
    if (model.shape.tie_embeddings && to[i].name == unembedding) {
      to[i].tensor->assign(nn::view(model).unembed.weight.to_vector());
      continue;
    }
    to[i].tensor->assign(from[j++].tensor->to_vector());
  }
  auto note = [log](const char* step, const std::string& what) {
    if (log) log->emplace_back(step, what);
  };
  const bool norms = v.final_read.norm.normalises, centring = v.final_read.norm.centres;
  if (steps.fold_ln) {
    // The identity norm (kind none) folds nothing.
    for (nn::ReadSite<T>& site : v.readers()) {
      if (!site.norm.normalises) continue;
      for (nn::LinearView<T>& reader : site.readers) fold(site.norm, reader);
      finish_fold(site.norm);
    }
    note("fold_ln", !norms ? "skipped: the model has no norms"
                    : centring
                        ? "the norms' weights and biases folded into their readers, rows centred"
                        : "the norms' weights folded into their readers (RMSNorm: no bias, no centring)");
  }
  // Writers to the stream, centred over d_model, when every reader of the stream (each a norm of the same
  // kind) removes its mean; otherwise the stream's mean is read and stays.
  if (steps.center_writing_weights) {
    if (centring) {
      centre(v.token_embedding, 1);
      if (v.position_embedding.defined()) centre(v.position_embedding, 1);
      for (nn::WriteSite<T>& site : v.writers()) {
        centre(site.writer.weight, 0);
        if (site.writer.has_bias()) centre(site.writer.bias, 1);
      }
    }
    const std::string writers =
        v.position_embedding.defined() ? "tok_emb, pos_emb, wo and fc2" : "tok_emb, wo and fc2";
    note("center_writing_weights", centring ? writers + " centred over d_model"
                                            : "skipped: the norms do not centre (the stream's mean is read)");
  }
  // The unembedding, centred over the vocabulary: a constant added to every logit changes no probability,
  // unless the logits are soft-capped (tanh is not shift-invariant), when it stays as it is.
  if (steps.center_unembed) {
    const bool capped = v.logit_softcap > 0;
    if (!capped) {
      centre(v.unembed.weight, 0);
      if (v.unembed.has_bias()) centre(v.unembed.bias, 1);
    }
    note("center_unembed", capped ? "skipped: logit_softcap (tanh is not shift-invariant)"
                                  : "lm_head centred over the vocabulary");
  }
  // After the centring: W_O's columns are centred, so W_O b_v is too. The value bias moves into the output
  // map's bias, which a model with q/k/v biases only (model.qkv_bias) does not have: then it stays.
  if (steps.fold_value_biases) {
    bool values = false, outputs = true;
    for (const nn::BlockView<T>& layer : v.layers) {
      values = values || layer.attention.value.has_bias();
      outputs = outputs && layer.attention.output.has_bias();
    }
    if (values && outputs)
      for (nn::BlockView<T>& layer : v.layers) fold_value_bias(layer.attention);
    note("fold_value_biases", !values    ? "skipped: the model has no biases"
                              : !outputs ? "skipped: wo has no bias to take wv.bias"
                                         : "wv.bias folded into wo.bias");
  }
  return out;
}

template std::unique_ptr<nn::CausalLM<float>> processed_weights<float>(const nn::CausalLM<float>&,
                                                                       const Processing&, ProcessingLog*);
template std::unique_ptr<nn::CausalLM<double>> processed_weights<double>(const nn::CausalLM<double>&,
                                                                         const Processing&, ProcessingLog*);

}  // namespace analysis
