// The one view of a CausalLM its readers take (see model_view.h). This file and the modules are the only
// places that name a block's members.
#include "nn/model_view.h"

namespace nn {
namespace {

template <typename T>
LinearView<T> linear_view(const Linear<T>& linear, const std::string& name) {
  return {linear.weight, linear.bias, name};
}

template <typename T>
NormView<T> norm_view(const Norm<T>& norm, Point scale_point, Point out_point) {
  NormView<T> v;
  v.kind = norm.kind();
  v.normalises = norm.normalises();
  v.centres = norm.centres();
  v.eps = static_cast<double>(norm.eps);
  v.weight = norm.weight;
  v.bias = norm.bias;
  v.scale_point = scale_point;
  v.out_point = out_point;
  v.module = &norm;
  return v;
}

template <typename T>
AttentionView<T> attention_view(const MultiHeadAttention<T>& attn, const std::string& prefix) {
  AttentionView<T> v;
  v.n_heads = attn.n_heads;
  v.n_kv_heads = attn.n_kv_heads;
  v.d_model = attn.d_model;
  v.dk = attn.dk;
  v.query = linear_view(attn.wq, prefix + "wq");
  v.key = linear_view(attn.wk, prefix + "wk");
  v.value = linear_view(attn.wv, prefix + "wv");
  v.output = linear_view(attn.wo, prefix + "wo");
  if (attn.q_norm) {
    v.query_norm = attn.q_norm->weight;
    v.key_norm = attn.k_norm->weight;
    v.norm_eps = static_cast<double>(attn.q_norm->eps);
  }
  v.rotary_dims = attn.rotary_dims;
  v.rotary_base = attn.rotary_base;
  v.score_scale = static_cast<double>(attn.score_scale());
  v.window = attn.window;
  return v;
}

template <typename T>
BlockView<T> block_view(const TransformerBlock<T>& block, size_t layer) {
  const std::string prefix = "blocks." + std::to_string(layer) + ".";
  BlockView<T> v;
  v.attention = attention_view(block.attn, prefix + "attn.");
  v.attn_in = {Point::resid_pre,
               norm_view(*block.ln1, Point::ln1_scale, Point::ln1_out),
               {v.attention.query, v.attention.key, v.attention.value}};
  v.attn_out = {Point::attn_out, v.attention.output};
  v.parallel = block.parallel;
  v.has_mlp = block.mlp != nullptr;
  if (!v.has_mlp) return v;
  const MLP<T>& mlp = *block.mlp;
  v.feed_forward.activation = mlp.activation;
  v.feed_forward.up = linear_view(mlp.fc1, prefix + "mlp.fc1");
  if (mlp.gate) v.feed_forward.gate_proj = linear_view(*mlp.gate, prefix + "mlp.gate");
  v.feed_forward.down = linear_view(mlp.fc2, prefix + "mlp.fc2");
  v.mlp_in = {block.parallel ? Point::resid_pre : Point::resid_mid,
              norm_view(*block.ln2, Point::ln2_scale, Point::ln2_out),
              {v.feed_forward.up}};
  if (v.feed_forward.gated()) v.mlp_in.readers.push_back(v.feed_forward.gate_proj);
  v.mlp_out = {Point::mlp_out, v.feed_forward.down};
  return v;
}

}  // namespace

template <typename T>
HeadWeights AttentionView<T>::head(int64_t h) const {
  HeadWeights w;
  w.W_Q = matrix_of(query.weight).middleRows(query_row(h), dk).transpose();
  w.W_K = matrix_of(key.weight).middleRows(key_row(h), dk).transpose();
  w.W_V = matrix_of(value.weight).middleRows(key_row(h), dk).transpose();
  w.W_O = matrix_of(output.weight).middleCols(output_column(h), dk).transpose();
  w.b_Q = vector_of(query.bias, query.weight.size(0)).segment(query_row(h), dk);
  w.b_K = vector_of(key.bias, key.weight.size(0)).segment(key_row(h), dk);
  w.b_V = vector_of(value.bias, value.weight.size(0)).segment(key_row(h), dk);
  return w;
}

template <typename T>
Eigen::MatrixXd AttentionView<T>::per_query_head(const LinearView<T>& kv) const {
  const Eigen::MatrixXd w = matrix_of(kv.weight);
  if (n_kv_heads == n_heads) return w;
  Eigen::MatrixXd out(n_heads * dk, w.cols());
  for (int64_t h = 0; h < n_heads; ++h) out.middleRows(query_row(h), dk) = w.middleRows(key_row(h), dk);
  return out;
}

template <typename T>
Eigen::VectorXd AttentionView<T>::per_query_head_bias(const LinearView<T>& kv) const {
  if (!kv.has_bias()) return {};
  const Eigen::VectorXd b = vector_of(kv.bias, 0);
  Eigen::VectorXd out(n_heads * dk);
  for (int64_t h = 0; h < n_heads; ++h) out.segment(query_row(h), dk) = b.segment(key_row(h), dk);
  return out;
}

template <typename T>
std::vector<WriteSite<T>> ModelView<T>::writers() const {
  std::vector<WriteSite<T>> out;
  for (const BlockView<T>& b : layers) {
    out.push_back(b.attn_out);
    if (b.has_mlp) out.push_back(b.mlp_out);
  }
  return out;
}

template <typename T>
std::vector<ReadSite<T>> ModelView<T>::readers() const {
  std::vector<ReadSite<T>> out;
  for (const BlockView<T>& b : layers) {
    out.push_back(b.attn_in);
    if (b.has_mlp) out.push_back(b.mlp_in);
  }
  out.push_back(final_read);
  return out;
}

template <typename T>
ModelView<T> view(const CausalLM<T>& model) {
  ModelView<T> v;
  v.shape = model.shape;
  v.token_embedding = model.tok_emb.weight;
  if (model.pos_emb) v.position_embedding = model.pos_emb->weight;
  for (size_t l = 0; l < model.blocks.size(); ++l) v.layers.push_back(block_view(*model.blocks[l], l));
  v.tied = model.shape.tie_embeddings;
  v.unembed = linear_view(model.lm_head, v.tied ? "tok_emb" : "lm_head");
  v.logit_softcap = model.shape.logit_softcap;
  v.final_read = {Point::resid_post, norm_view(*model.ln_f, Point::ln_f_scale, Point::ln_f_out), {v.unembed}};
  return v;
}

template <typename T>
Eigen::MatrixXd matrix_of(const ag::Tensor<T>& t) {
  const int64_t rows = t.size(0), cols = t.numel() / t.size(0);
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(t.data(), rows,
                                                                                             cols)
      .template cast<double>();
}

template <typename T>
Eigen::VectorXd vector_of(const ag::Tensor<T>& t, int64_t size) {
  if (!t.defined()) return Eigen::VectorXd::Zero(size);
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(t.data(), t.numel()).template cast<double>();
}

template struct AttentionView<float>;
template struct AttentionView<double>;
template struct ModelView<float>;
template struct ModelView<double>;
template ModelView<float> view(const CausalLM<float>&);
template ModelView<double> view(const CausalLM<double>&);
template Eigen::MatrixXd matrix_of(const ag::Tensor<float>&);
template Eigen::MatrixXd matrix_of(const ag::Tensor<double>&);
template Eigen::VectorXd vector_of(const ag::Tensor<float>&, int64_t);
template Eigen::VectorXd vector_of(const ag::Tensor<double>&, int64_t);

}  // namespace nn
