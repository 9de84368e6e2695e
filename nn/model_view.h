// One view of a CausalLM for every reader: the study tools, weight processing, the attribution graph, import
// and Python's W_Q/W_K/... read the model through this, never through a block's members. It says, per block,
// where the residual stream is read (a norm and the projections that read its output) and written (the
// projection whose output is added to it), and per query head the weights as a reader needs them,
// grouped-query attention already expanded (query head h's key and value are kv head kv_head(h)'s rows). A
// model option that changes what a reader sees (a norm's kind, rotary positions, biases, tied embeddings, a
// softcap) is stated here once; readers branch on the view's facts, never on the option.
//
// Not the forward: the modules compute (nn/transformer.h); this only names their tensors. The tensors are
// handles that share the model's storage, so writing through a view of a model (weight processing does, on
// its copy) changes that model. A view is valid while its model lives.
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace nn {

// A linear map of the model, y = x W^T + b.
template <typename T>
struct LinearView {
  ag::Tensor<T> weight;  // (out, in), as nn.Linear's
  ag::Tensor<T> bias;    // (out), or undefined when the model has none here
  std::string name;  // its parameters' prefix: "blocks.0.attn.wq" (weight and bias add ".weight", ".bias")
  bool has_bias() const { return bias.defined(); }
};

// A norm as its readers need it: out = c * scale * weight + bias with c = x - mean(x) when it centres, else
// x, scale = 1 / sqrt(mean(c^2) + eps); the identity when it does not normalise.
template <typename T>
struct NormView {
  NormKind kind = NormKind::none;
  bool normalises = false;  // false: the identity, no parameters, no hook points
  bool centres = false;     // subtracts each row's mean first (LayerNorm)
  double eps = 0;
  ag::Tensor<T> weight;                   // (D), or undefined
  ag::Tensor<T> bias;                     // (D), or undefined
  Point scale_point = Point::ln_f_scale;  // the hook point holding its scale (B, T, 1), when it normalises
  Point out_point = Point::ln_f_out;      // the hook point holding its output
  const Norm<T>* module = nullptr;        // the module, to run it (its forward)
};

// Where the residual stream is read: the norm of `input` and the projections that read the norm's output.
template <typename T>
struct ReadSite {
  Point input = Point::resid_pre;  // the stream point it reads: resid_pre, resid_mid, or the last resid_post
  NormView<T> norm;
  std::vector<LinearView<T>> readers;  // attention: wq, wk, wv; MLP: fc1 (and gate); final: the unembedding
};

// Where the residual stream is written: a projection whose output (at `output`) is added to it.
template <typename T>
struct WriteSite {
  Point output = Point::attn_out;  // attn_out or mlp_out
  LinearView<T> writer;            // wo or fc2: (D, in)
};

// Query head h of one layer as a reader needs it, in TransformerLens's orientation (x W_Q = q): the
// projections sliced to the head, grouped-query attention expanded. Biases are zero where the model has none.
struct HeadWeights {
  Eigen::MatrixXd W_Q, W_K, W_V;  // (D, dk) each: the head's query, key and value maps
  Eigen::MatrixXd W_O;            // (dk, D): the head's rows of the output map
  Eigen::VectorXd b_Q, b_K, b_V;  // (dk) each
};

template <typename T>
struct AttentionView {
  int64_t n_heads = 0, n_kv_heads = 0, d_model = 0, dk = 0;
  LinearView<T> query, key, value, output;  // wq (H dk, D); wk, wv (Hkv dk, D); wo (D, H dk)
  // QK-norm: the RMSNorm weights (dk) on each head's q and k (shared by the heads), or undefined.
  ag::Tensor<T> query_norm, key_norm;
  double norm_eps = 0;
  int64_t rotary_dims = 0;  // each head's first rotary_dims values of q and k are turned (0: no rotary)
  double rotary_base = 10000;
  double score_scale = 1;  // the factor on q k^T
  int64_t window = 0;      // query t sees keys in (t - window, t]; 0: every earlier key

  // The kv head query head h reads: h / (n_heads / n_kv_heads), Llama's and Hugging Face's repeat_kv order.
  int64_t kv_head(int64_t h) const { return h / (n_heads / n_kv_heads); }
  // The first row of head h's slice of wq, and of wk and wv (its kv head's); the first column of its wo.
  int64_t query_row(int64_t h) const { return h * dk; }
  int64_t key_row(int64_t h) const { return kv_head(h) * dk; }
  int64_t output_column(int64_t h) const { return h * dk; }
  // Head h's weights in float64.
  HeadWeights head(int64_t h) const;
  // Grouped-query attention as the plain attention it equals: key's or value's weight (Hkv dk, D) with kv
  // head kv_head(h)'s rows at query head h's place, (H dk, D); its bias likewise (H dk), empty when none.
  Eigen::MatrixXd per_query_head(const LinearView<T>& key_or_value) const;
  Eigen::VectorXd per_query_head_bias(const LinearView<T>& key_or_value) const;
};

template <typename T>
struct MLPView {
  Activation activation = Activation::gelu;
  LinearView<T> up;         // fc1 (F, D): the input projection
  LinearView<T> gate_proj;  // gate (F, D): a gated MLP's gate; weight undefined when not gated
  LinearView<T> down;       // fc2 (D, F): the output projection
  bool gated() const { return gate_proj.weight.defined(); }
};

// One block, as its sites in forward order: attention reads, attention writes, the MLP reads, the MLP writes.
template <typename T>
struct BlockView {
  ReadSite<T> attn_in;  // ln1 and wq, wk, wv
  AttentionView<T> attention;
  WriteSite<T> attn_out;  // wo
  bool has_mlp = false;   // false: attention only, the MLP's sites are empty
  bool parallel = false;  // the MLP reads resid_pre (attn_in's input), not resid_mid
  ReadSite<T> mlp_in;     // ln2 and fc1 (and gate)
  MLPView<T> feed_forward;
  WriteSite<T> mlp_out;  // fc2
};

template <typename T>
struct ModelView {
  ModelShape shape;
  ag::Tensor<T> token_embedding;     // (V, D): writes embed into the stream
  ag::Tensor<T> position_embedding;  // (max_len, D) with learned positions, else undefined
  std::vector<BlockView<T>> layers;
  ReadSite<T> final_read;    // ln_f and the unembedding (its one reader)
  LinearView<T> unembed;     // (V, D): lm_head, or tok_emb's weight when tied (then name "tok_emb")
  bool tied = false;         // the unembedding is the token embedding's weight
  double logit_softcap = 0;  // > 0: logits = c tanh(logits / c), after the unembedding

  // Every projection that writes the stream, in forward order: each block's wo, then its fc2 (the
  // embeddings write it too: token_embedding, position_embedding).
  std::vector<WriteSite<T>> writers() const;
  // Every site where the stream is read, in forward order: each block's ln1 and ln2, then ln_f.
  std::vector<ReadSite<T>> readers() const;
};

// The view of `model`. Its tensors are the model's (shared storage).
template <typename T>
ModelView<T> view(const CausalLM<T>& model);

// The matrix of a 2-D tensor (rows, cols) in float64.
template <typename T>
Eigen::MatrixXd matrix_of(const ag::Tensor<T>& t);
// The vector of a 1-D tensor in float64; `size` zeros when it is undefined.
template <typename T>
Eigen::VectorXd vector_of(const ag::Tensor<T>& t, int64_t size);

}  // namespace nn
