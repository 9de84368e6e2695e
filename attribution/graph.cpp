#include "attribution/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "analysis/run_study.h"
#include "dictionary/transcoder.h"
#include "findings/graph_html.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/hooks.h"
#include "nn/model_view.h"
#include "train/safetensors.h"

namespace attribution {

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;
using findings::GraphNode;
using findings::GraphNodeKind;

// Most target logits, and the probability they cover (circuit-tracer's salient logits).
constexpr int kMaxLogits = 10;
constexpr double kLogitProbability = 0.95;
// QK terms shown, largest first.
constexpr size_t kQkTerms = 12;
// Logit effects listed per feature, each way.
constexpr int64_t kLogitEffects = 5;
// Top examples carried per feature from its feature page, each a window of this many tokens before the
// peak and after it; and the largest features.json read (a page of 4096 features is a few MiB).
constexpr size_t kGraphExamples = 5;
constexpr int kExampleBefore = 8, kExampleAfter = 3;
constexpr size_t kMaxFeaturePageBytes = size_t(256) << 20;

// Layer `layer`'s feature page under the transcoder folder, DIR/L/features.json (attograd transcoder's):
// each feature's top examples as windows around the peak, keyed by the feature's index; nullopt when the
// file is absent. A malformed file is one line naming it and the field.
std::optional<std::map<int64_t, std::vector<findings::GraphExample>>> read_feature_examples(
    const std::string& folder, int layer) {
  const std::string path = io::layout::transcoder_features_json(io::layout::transcoder_dir(folder, layer));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const nlohmann::json j = io::load_json_file(path, kMaxFeaturePageBytes, "a feature page");
  std::map<int64_t, std::vector<findings::GraphExample>> out;
  try {
    for (const nlohmann::json& f : j.get_ref<const nlohmann::json::array_t&>()) {
      std::vector<findings::GraphExample>& list = out[f.at("index").get<int64_t>()];
      for (const nlohmann::json& e : f.at("examples")) {
        if (list.size() == kGraphExamples) break;
        const std::vector<std::string> tokens = e.at("tokens").get<std::vector<std::string>>();
        const int peak = e.at("position").get<int>();
        if (peak < 0 || peak >= static_cast<int>(tokens.size()))
          throw std::runtime_error("an example's position outside its tokens");
        const int from = std::max(0, peak - kExampleBefore);
        const int to = std::min(static_cast<int>(tokens.size()), peak + kExampleAfter + 1);
        list.push_back({std::vector<std::string>(tokens.begin() + from, tokens.begin() + to), peak - from,
                        e.at("max").get<double>()});
      }
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(path +
                             ": expected features.json's array of {index, examples: [{position, max, "
                             "tokens}]}: " +
                             e.what());
  }
  return out;
}

Mat to_mat(const ag::Tensor<double>& t, int64_t rows, int64_t cols) {
  return Eigen::Map<const Mat>(t.data(), rows, cols);
}
Mat to_mat(const ag::Tensor<float>& t, int64_t rows, int64_t cols) {
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(t.data(),
                                                                                                 rows, cols)
      .cast<double>();
}
Vec to_vec(const ag::Tensor<double>& t) {
  return Eigen::Map<const Vec>(t.data(), t.numel());
}
Vec to_vec(const ag::Tensor<float>& t) {
  return Eigen::Map<const Eigen::VectorXf>(t.data(), t.numel()).cast<double>();
}

}  // namespace

// The local replacement model's parts (not in the anonymous namespace: LocalReplacement::Impl holds them).
namespace graph_parts {

// A norm frozen on the prompt: y = c(x) * s * w (+ b), c centring (LayerNorm) or the identity (RMSNorm), s
// the prompt's scale per position; the identity for a model without norms.
struct FrozenNorm {
  bool normalises = false, centres = false;
  Vec s, w, b;  // s (T); w, b (D) or empty
  Mat forward(const Mat& x, bool bias) const {
    if (!normalises) return x;
    Mat y = x;
    if (centres) y.colwise() -= y.rowwise().mean();
    y = s.asDiagonal() * y;
    if (w.size()) y = y * w.asDiagonal();
    if (bias && b.size()) y.rowwise() += b.transpose();
    return y;
  }
  // The linear part's transpose: dL/dx from dL/dy.
  Mat adjoint(const Mat& gy) const {
    if (!normalises) return gy;
    Mat g = gy;
    if (w.size()) g = g * w.asDiagonal();
    g = s.asDiagonal() * g;
    if (centres) g.colwise() -= g.rowwise().mean();
    return g;
  }
};

FrozenNorm freeze(const nn::NormView<double>& n, const nn::Hooks<double>& hooks, size_t layer) {
  FrozenNorm f;
  f.normalises = n.normalises;
  if (!f.normalises) return f;
  f.centres = n.centres;
  f.s = to_vec(hooks.captured(nn::hook_name(n.scale_point, layer)));
  if (n.weight.defined()) f.w = to_vec(n.weight);
  if (n.bias.defined()) f.b = to_vec(n.bias);
  return f;
}

}  // namespace graph_parts

using graph_parts::FrozenNorm;

namespace {

// `to`'s weights set to `from`'s, converted (the same architecture, parameter for parameter).
void copy_weights(const nn::CausalLM<float>& from, nn::CausalLM<double>& to) {
  const auto src = from.named_parameters();
  const auto dst = to.named_parameters();
  for (size_t i = 0; i < src.size(); ++i)
    for (int64_t k = 0; k < src[i].tensor->numel(); ++k) dst[i].tensor->data()[k] = src[i].tensor->data()[k];
}

// The hook points the graph reads from the float64 forward: every layer's attention pattern and scores,
// the norms' scales, and with MLPs each transcoder's input and the MLP's output.
void capture_graph_points(nn::Hooks<double>& hooks, const nn::CausalLM<float>& model, bool has_mlp) {
  const int L = static_cast<int>(model.shape.n_layers);
  const bool norms = nn::has_norm(model.shape.norm);
  for (int l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l);
    hooks.capture(b + ".attn.pattern");
    hooks.capture(b + ".attn.scores");
    if (norms) hooks.capture(b + ".ln1.scale");
    if (has_mlp) {
      if (norms) hooks.capture(b + ".ln2.scale");
      hooks.capture(dictionary::transcoder_in_point(model, l));
      hooks.capture(b + ".mlp.out");
    }
  }
  if (norms) hooks.capture("ln_f.scale");
}

// A transcoder's activations from its pre-activations (T, M): ReLU, then only the features above their
// thresholds (JumpReLU, BatchTopK) or each position's k largest (TopK, ties to the lower index).
Mat transcoder_activations(const LayerTranscoder& tc, const Mat& pre) {
  const int64_t T = pre.rows(), M = pre.cols();
  Mat act = pre.cwiseMax(0.0);
  if (tc.params.threshold.defined()) {  // JumpReLU, BatchTopK: the features above their threshold
    const Vec theta = to_vec(tc.params.threshold);
    for (int t = 0; t < T; ++t)
      for (int64_t j = 0; j < M; ++j)
        if (!(pre(t, j) > theta[j])) act(t, j) = 0;
  } else if (tc.activation == dictionary::SaeActivation::topk)
    for (int t = 0; t < T; ++t) {
      std::vector<int64_t> order(M);
      std::iota(order.begin(), order.end(), 0);
      const auto row = pre.row(t);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return row(a) > row(c); });
      for (int64_t i = tc.k; i < M; ++i) act(t, order[i]) = 0;
    }
  return act;
}

}  // namespace

struct LocalReplacement::Impl {
  int L = 0, T = 0, D = 0, H = 0, dk = 0;
  bool has_mlp = false;
  std::vector<GraphNode> nodes;
  int64_t n_features = 0, n_errors = 0, n_logits = 0;
  // Per layer: the frozen norms, the patterns (H of (T, T)), Wv, bv, Wo, bo.
  std::vector<FrozenNorm> attn_norm, mlp_norm;
  FrozenNorm final_norm;
  std::vector<std::vector<Mat>> pattern;
  std::vector<Mat> Wq, Wk, Wv, Wo;
  std::vector<Vec> bq, bk, bv, bo;
  std::vector<Mat> scores;  // per layer, (H * T, T): the model's attention scores on the prompt
  // Per MLP layer: the transcoder, and the error (T, D). W_dec[l] (M, writes[l] * D): a cross-layer
  // transcoder's layer l writes to the MLP outputs of layers l .. l + writes[l] - 1.
  std::vector<Mat> W_enc, W_dec, W_skip, error;
  std::vector<int> writes;
  std::vector<Vec> b_enc, b_dec;
  Mat tok, pos;       // (T, D): each position's token and positional embedding
  Mat unembed;        // (K, D): the targets' demeaned unembedding rows
  Mat vocab_unembed;  // (V, D): every token's demeaned unembedding row
  Vec unembed_bias;
  // Each write of a source node into the residual stream: the vector, the node, the level it writes at (0:
  // the embedding, l + 1: after layer l's MLP), at the node's position. A node writes once, but a
  // cross-layer transcoder's feature writes once per MLP output it reaches. level[node] is its lowest.
  Mat contribution;  // (writes, D)
  std::vector<int64_t> write_node;
  std::vector<int> write_level;
  std::vector<std::vector<int64_t>> node_writes;  // per node, its writes
  std::vector<int> level;
  Vec values;

  // The constructor's steps, in its order (each reads what the ones before it set).
  // The attention layers with their norms frozen on the prompt, the final norm, and the prompt's token and
  // position embeddings (ids checked against the vocabulary).
  void read_model(const nn::ModelView<double>& mv, const nn::Hooks<double>& hooks,
                  const std::vector<int32_t>& ids, const nn::ModelShape& shape);
  // With MLPs, each layer's transcoder and error and a node per active feature, by (layer, position,
  // feature); returns each layer's feature pre-activations (T, M) (none without MLPs).
  std::vector<Mat> add_feature_nodes(const nn::CausalLM<float>& model,
                                     const std::vector<LayerTranscoder>& transcoders,
                                     const nn::Hooks<double>& hooks);
  // The error nodes (with MLPs), then the token and position embeddings' nodes.
  void add_error_and_input_nodes(const std::vector<int32_t>& ids);
  // The target logits' nodes, demeaned over the vocabulary (V tokens).
  void add_logit_nodes(const nn::ModelView<double>& mv, const std::vector<int32_t>& targets,
                       const std::vector<double>& target_weights, int64_t V);
  // Each source's contribution and level; each target's value in the model itself (its logits' last V).
  void add_contributions(const std::vector<Mat>& pre, const ag::Tensor<double>& logits, int64_t V);

  Mat attention(int l, const Mat& x, bool bias) const {
    Mat v = x * Wv[l].transpose();
    if (bias && bv[l].size()) v.rowwise() += bv[l].transpose();
    Mat z(T, D);
    for (int h = 0; h < H; ++h) z.middleCols(h * dk, dk) = pattern[l][h] * v.middleCols(h * dk, dk);
    Mat out = z * Wo[l].transpose();
    if (bias && bo[l].size()) out.rowwise() += bo[l].transpose();
    return out;
  }
  // One head's part of attention_adjoint: its value and output columns only.
  Mat head_adjoint(int l, int h, const Mat& g) const {
    const Mat zbar = g * Wo[l].middleCols(h * dk, dk);
    return (pattern[l][h].transpose() * zbar) * Wv[l].middleRows(h * dk, dk);
  }
  Mat attention_adjoint(int l, const Mat& g) const {
    const Mat zbar = g * Wo[l];
    Mat vbar(T, D);
    for (int h = 0; h < H; ++h)
      vbar.middleCols(h * dk, dk) = pattern[l][h].transpose() * zbar.middleCols(h * dk, dk);
    return vbar * Wv[l];
  }
};

LocalReplacement::~LocalReplacement() = default;

void LocalReplacement::Impl::read_model(const nn::ModelView<double>& mv, const nn::Hooks<double>& hooks,
                                        const std::vector<int32_t>& ids, const nn::ModelShape& shape) {
  for (int l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l);
    const nn::BlockView<double>& block = mv.layers[l];
    const nn::AttentionView<double>& attn = block.attention;
    attn_norm.push_back(graph_parts::freeze(block.attn_in.norm, hooks, l));
    const ag::Tensor<double>& p = hooks.captured(b + ".attn.pattern");  // (1, H, T, T)
    pattern.emplace_back();
    for (int h = 0; h < H; ++h)
      pattern.back().push_back(Eigen::Map<const Mat>(p.data() + static_cast<int64_t>(h) * T * T, T, T));
    Wq.push_back(to_mat(attn.query.weight, D, D));
    Wk.push_back(attn.per_query_head(attn.key));
    bq.push_back(attn.query.has_bias() ? to_vec(attn.query.bias) : Vec());
    bk.push_back(attn.per_query_head_bias(attn.key));
    scores.push_back(Eigen::Map<const Mat>(hooks.captured(b + ".attn.scores").data(), H * T, T));
    Wv.push_back(attn.per_query_head(attn.value));
    Wo.push_back(to_mat(attn.output.weight, D, D));
    bv.push_back(attn.per_query_head_bias(attn.value));
    bo.push_back(attn.output.has_bias() ? to_vec(attn.output.bias) : Vec());
    if (has_mlp) mlp_norm.push_back(graph_parts::freeze(block.mlp_in.norm, hooks, l));
  }
  final_norm = graph_parts::freeze(mv.final_read.norm, hooks, 0);
  for (int t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= shape.vocab) throw std::invalid_argument("graph: token id out of range");
  }
  tok = Mat(T, D);
  pos = Mat::Zero(T, D);  // rotary or no positions: none in the stream (the patterns are frozen)
  const Mat E = to_mat(mv.token_embedding, shape.vocab, D);
  for (int t = 0; t < T; ++t) tok.row(t) = E.row(ids[t]);
  if (mv.position_embedding.defined()) {
    const Mat P = to_mat(mv.position_embedding, shape.max_len, D);
    for (int t = 0; t < T; ++t) pos.row(t) = P.row(t);
  }
}

std::vector<Mat> LocalReplacement::Impl::add_feature_nodes(const nn::CausalLM<float>& model,
                                                           const std::vector<LayerTranscoder>& transcoders,
                                                           const nn::Hooks<double>& hooks) {
  std::vector<Mat> pre(L);
  if (has_mlp) {
    W_enc.resize(L);
    W_dec.resize(L);
    W_skip.resize(L);
    error.resize(L);
    b_enc.resize(L);
    b_dec.resize(L);
    writes.assign(L, 1);
    std::vector<Mat> acts(L), xs(L);
    for (int l = 0; l < L; ++l) {
      const LayerTranscoder& tc = transcoders.at(l);
      if (!tc.params.W_enc.defined() || tc.params.d_in() != D || tc.params.d_out() != D)
        throw std::invalid_argument("graph: layer " + std::to_string(l) +
                                    " has an MLP but no transcoder reading and writing d_model");
      const int64_t M = tc.params.d_sae();
      writes[l] = static_cast<int>(tc.params.writes);
      if (writes[l] < 1 || l + writes[l] > L)
        throw std::invalid_argument("graph: layer " + std::to_string(l) +
                                    "'s transcoder writes past the last layer");
      W_enc[l] = to_mat(tc.params.W_enc, D, M);
      b_enc[l] = to_vec(tc.params.b_enc);
      W_dec[l] = to_mat(tc.params.W_dec, M, writes[l] * D);
      b_dec[l] = to_vec(tc.params.b_dec);
      if (tc.params.W_skip.defined()) W_skip[l] = to_mat(tc.params.W_skip, D, D);
      const std::string b = "blocks." + std::to_string(l);
      const Mat x = to_mat(hooks.captured(dictionary::transcoder_in_point(model, l)), T, D);
      pre[l] = x * W_enc[l];
      pre[l].rowwise() += b_enc[l].transpose();
      acts[l] = transcoder_activations(tc, pre[l]);
      xs[l] = x;
    }
    for (int l = 0; l < L; ++l) {
      // Layer l's MLP output as the transcoders write it: its bias, its skip, and the decoder rows of every
      // layer at or below it that reaches it.
      const std::string b = "blocks." + std::to_string(l);
      Mat out = Mat::Zero(T, D);
      out.rowwise() += b_dec[l].transpose();
      if (W_skip[l].size()) out += xs[l] * W_skip[l];
      for (int l0 = 0; l0 <= l; ++l0)
        if (l0 + writes[l0] > l) out += acts[l0] * W_dec[l0].middleCols((l - l0) * D, D);
      error[l] = to_mat(hooks.captured(b + ".mlp.out"), T, D) - out;
    }
    for (int l = 0; l < L; ++l) {
      const Mat& act = acts[l];
      const int64_t M = act.cols();
      for (int t = 0; t < T; ++t)
        for (int64_t j = 0; j < M; ++j)
          if (act(t, j) > 0) {
            GraphNode n;
            n.kind = GraphNodeKind::feature;
            n.layer = l;
            n.position = t;
            n.index = j;
            n.activation = act(t, j);
            nodes.push_back(n);
          }
    }
  }
  return pre;
}

void LocalReplacement::Impl::add_error_and_input_nodes(const std::vector<int32_t>& ids) {
  n_features = static_cast<int64_t>(nodes.size());
  if (has_mlp)
    for (int l = 0; l < L; ++l)
      for (int t = 0; t < T; ++t) {
        GraphNode n;
        n.kind = GraphNodeKind::error;
        n.layer = l;
        n.position = t;
        n.index = -1;
        nodes.push_back(n);
      }
  n_errors = static_cast<int64_t>(nodes.size()) - n_features;
  for (GraphNodeKind kind : {GraphNodeKind::embedding, GraphNodeKind::position})
    for (int t = 0; t < T; ++t) {
      GraphNode n;
      n.kind = kind;
      n.layer = -1;
      n.position = t;
      n.index = kind == GraphNodeKind::embedding ? ids[t] : -1;
      nodes.push_back(n);
    }
}

void LocalReplacement::Impl::add_logit_nodes(const nn::ModelView<double>& mv,
                                             const std::vector<int32_t>& targets,
                                             const std::vector<double>& target_weights, int64_t V) {
  const Mat W_U = to_mat(mv.unembed.weight, V, D);
  const Vec mean_row = W_U.colwise().mean().transpose();
  const Vec b_U = mv.unembed.has_bias() ? to_vec(mv.unembed.bias) : Vec::Zero(V);
  n_logits = static_cast<int64_t>(targets.size());
  vocab_unembed = W_U.rowwise() - mean_row.transpose();
  unembed = Mat(n_logits, D);
  unembed_bias = Vec(n_logits);
  for (size_t k = 0; k < targets.size(); ++k) {
    unembed.row(k) = W_U.row(targets[k]) - mean_row.transpose();
    unembed_bias[k] = b_U[targets[k]] - b_U.mean();
    GraphNode n;
    n.kind = GraphNodeKind::logit;
    n.layer = L;
    n.position = T - 1;
    n.index = targets[k];
    n.activation = target_weights.at(k);
    nodes.push_back(n);
  }
}

void LocalReplacement::Impl::add_contributions(const std::vector<Mat>& pre, const ag::Tensor<double>& logits,
                                               int64_t V) {
  const int64_t N = static_cast<int64_t>(nodes.size());
  int64_t n_writes = N - n_logits;
  for (int64_t i = 0; i < n_features; ++i) n_writes += writes[nodes[i].layer] - 1;
  contribution = Mat::Zero(n_writes, D);
  node_writes.assign(N, {});
  level.assign(N, -1);
  values = Vec::Zero(N);
  auto add_write = [&](int64_t node, int at_level, const auto& row) {
    node_writes[node].push_back(static_cast<int64_t>(write_node.size()));
    contribution.row(static_cast<int64_t>(write_node.size())) = row;
    write_node.push_back(node);
    write_level.push_back(at_level);
    if (level[node] < 0) level[node] = at_level;
  };
  const Vec final_logits = to_vec(logits).tail(V);
  for (int64_t i = 0; i < N; ++i) {
    const GraphNode& n = nodes[i];
    switch (n.kind) {
      case GraphNodeKind::feature:
        for (int w = 0; w < writes[n.layer]; ++w)
          add_write(i, n.layer + w + 1, n.activation * W_dec[n.layer].row(n.index).segment(w * D, D));
        values[i] = pre[n.layer](n.position, n.index);
        break;
      case GraphNodeKind::error:
        add_write(i, n.layer + 1, error[n.layer].row(n.position));
        break;
      case GraphNodeKind::embedding:
        add_write(i, 0, tok.row(n.position));
        break;
      case GraphNodeKind::position:
        add_write(i, 0, pos.row(n.position));
        break;
      case GraphNodeKind::logit:
        values[i] = final_logits[n.index] - final_logits.mean();
        break;
    }
  }
}

LocalReplacement::LocalReplacement(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids,
                                   const std::vector<LayerTranscoder>& transcoders,
                                   const std::vector<int32_t>& targets,
                                   const std::vector<double>& target_weights)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.L = static_cast<int>(model.shape.n_layers);
  m.T = static_cast<int>(ids.size());
  m.D = static_cast<int>(model.shape.d_model);
  m.H = static_cast<int>(model.shape.n_heads);
  m.dk = m.D / m.H;
  m.has_mlp = !model.shape.attention_only;
  // The model in float64: its weights converted, run by its own reference forward with hooks.
  ag::Rng rng(1);
  nn::CausalLM<double> dm(model.shape, rng);
  copy_weights(model, dm);
  nn::Hooks<double> hooks;
  capture_graph_points(hooks, model, m.has_mlp);
  ag::Tensor<double> logits;
  {
    ag::NoGradScope no_grad;
    logits = dm.forward(ids, 1, m.T, {}, &hooks);
  }
  const nn::ModelView<double> mv = nn::view(dm);
  m.read_model(mv, hooks, ids, model.shape);
  const std::vector<Mat> pre = m.add_feature_nodes(model, transcoders, hooks);
  m.add_error_and_input_nodes(ids);
  m.add_logit_nodes(mv, targets, target_weights, model.shape.vocab);
  m.add_contributions(pre, logits, model.shape.vocab);
}

const std::vector<GraphNode>& LocalReplacement::nodes() const {
  return impl_->nodes;
}
int64_t LocalReplacement::n_features() const {
  return impl_->n_features;
}
int64_t LocalReplacement::n_errors() const {
  return impl_->n_errors;
}
int64_t LocalReplacement::n_tokens() const {
  return impl_->T;
}
int64_t LocalReplacement::n_logits() const {
  return impl_->n_logits;
}
const Eigen::VectorXd& LocalReplacement::model_values() const {
  return impl_->values;
}

Eigen::VectorXd LocalReplacement::logit_weights() const {
  Vec w = Vec::Zero(size());
  for (int64_t k = 0; k < impl_->n_logits; ++k)
    w[size() - impl_->n_logits + k] = impl_->nodes[size() - impl_->n_logits + k].activation;
  return w;
}

Eigen::VectorXd LocalReplacement::forward(const Eigen::VectorXd& multiplier, bool biases) const {
  return run(multiplier, biases, impl_->L, nullptr);
}

Eigen::VectorXd LocalReplacement::run(const Eigen::VectorXd& multiplier, bool biases, int stop_layer,
                                      Eigen::MatrixXd* resid) const {
  const Impl& m = *impl_;
  const int64_t N = size();
  Vec out = Vec::Zero(N);
  // Sources by level, the level's rows of the residual they write.
  auto write = [&](Mat& h, int level) {
    for (size_t w = 0; w < m.write_node.size(); ++w)
      if (m.write_level[w] == level) {
        const int64_t i = m.write_node[w];
        h.row(m.nodes[i].position) += multiplier[i] * m.contribution.row(static_cast<int64_t>(w));
      }
  };
  Mat h = Mat::Zero(m.T, m.D);
  write(h, 0);
  for (int l = 0; l < m.L; ++l) {
    if (l == stop_layer) {
      *resid = h;
      return out;
    }
    h += m.attention(l, m.attn_norm[l].forward(h, biases), biases);
    if (!m.has_mlp) continue;
    const Mat x2 = m.mlp_norm[l].forward(h, biases);
    for (int64_t i = 0; i < m.n_features; ++i) {
      const GraphNode& n = m.nodes[i];
      if (n.layer != l) continue;
      out[i] = x2.row(n.position).dot(m.W_enc[l].col(n.index)) + (biases ? m.b_enc[l][n.index] : 0.0);
    }
    Mat mlp_out = Mat::Zero(m.T, m.D);
    if (biases) mlp_out.rowwise() += m.b_dec[l].transpose();
    if (m.W_skip[l].size()) mlp_out += x2 * m.W_skip[l];
    write(mlp_out, l + 1);
    h += mlp_out;
  }
  const Mat xf = m.final_norm.forward(h, biases);
  for (int64_t k = 0; k < m.n_logits; ++k)
    out[N - m.n_logits + k] = xf.row(m.T - 1).dot(m.unembed.row(k)) + (biases ? m.unembed_bias[k] : 0.0);
  return out;
}

Eigen::MatrixXd LocalReplacement::feature_logit_effects() const {
  const Impl& m = *impl_;
  Mat rows(m.n_features, m.D);
  // A cross-layer feature's rows into every MLP output it reaches, summed: all it writes to the stream.
  for (int64_t i = 0; i < m.n_features; ++i) {
    const GraphNode& n = m.nodes[i];
    rows.row(i) = m.W_dec[n.layer].row(n.index).segment(0, m.D);
    for (int w = 1; w < m.writes[n.layer]; ++w)
      rows.row(i) += m.W_dec[n.layer].row(n.index).segment(w * m.D, m.D);
  }
  // The frozen final norm at the last position, without its bias: centre, scale, weight.
  if (m.final_norm.normalises) {
    if (m.final_norm.centres) rows.colwise() -= rows.rowwise().mean();
    rows *= m.final_norm.s[m.T - 1];
    if (m.final_norm.w.size()) rows = rows * m.final_norm.w.asDiagonal();
  }
  return rows * m.vocab_unembed.transpose();
}

Eigen::MatrixXd LocalReplacement::adjacency() const {
  const Impl& m = *impl_;
  const int64_t N = size();
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(N, N);
  // Writes by level.
  std::vector<std::vector<int64_t>> at_level(m.L + 1);
  for (size_t w = 0; w < m.write_node.size(); ++w)
    at_level[m.write_level[w]].push_back(static_cast<int64_t>(w));
  // From the gradient G at the residual entering layer `level` (or the final residual, level L), the direct
  // effects of that level's sources, then on down through the layers below: attention and the skips, never
  // a feature or an error.
  auto sweep = [&](int64_t target, Mat G, int level) {
    for (;;) {
      for (int64_t w : at_level[level]) {
        const int64_t s = m.write_node[w];
        A(target, s) += m.contribution.row(w).dot(G.row(m.nodes[s].position));
      }
      if (level == 0) return;
      const int l = level - 1;
      if (m.has_mlp && m.W_skip[l].size()) G += m.mlp_norm[l].adjoint(G * m.W_skip[l].transpose());
      G += m.attn_norm[l].adjoint(m.attention_adjoint(l, G));
      level = l;
    }
  };
  for (int64_t i = 0; i < m.n_features; ++i) {
    const GraphNode& n = m.nodes[i];
    Mat gy = Mat::Zero(m.T, m.D);
    gy.row(n.position) = m.W_enc[n.layer].col(n.index).transpose();
    Mat G = m.mlp_norm[n.layer].adjoint(gy);  // at resid_mid of the feature's layer
    G += m.attn_norm[n.layer].adjoint(m.attention_adjoint(n.layer, G));
    sweep(i, G, n.layer);
  }
  for (int64_t k = 0; k < m.n_logits; ++k) {
    Mat gy = Mat::Zero(m.T, m.D);
    gy.row(m.T - 1) = m.unembed.row(k);
    sweep(N - m.n_logits + k, m.final_norm.adjoint(gy), m.L);
  }
  return A;
}

std::vector<PathTerm> LocalReplacement::edge_paths(int64_t target, int64_t source) const {
  const Impl& m = *impl_;
  const int64_t N = size();
  const GraphNode& t = m.nodes.at(target);
  if (m.level.at(source) < 0)
    throw std::invalid_argument("edge_paths: node " + std::to_string(source) + " is not a source");
  using Path = std::vector<std::pair<int, int>>;
  std::map<Path, Mat> paths;
  int level = 0;
  if (t.kind == GraphNodeKind::feature) {
    Mat gy = Mat::Zero(m.T, m.D);
    gy.row(t.position) = m.W_enc[t.layer].col(t.index).transpose();
    const Mat G = m.mlp_norm[t.layer].adjoint(gy);
    paths[{}] = G;
    for (int h = 0; h < m.H; ++h)
      paths[{{t.layer, h}}] = m.attn_norm[t.layer].adjoint(m.head_adjoint(t.layer, h, G));
    level = t.layer;
  } else if (t.kind == GraphNodeKind::logit && target >= N - m.n_logits) {
    Mat gy = Mat::Zero(m.T, m.D);
    gy.row(m.T - 1) = m.unembed.row(target - (N - m.n_logits));
    paths[{}] = m.final_norm.adjoint(gy);
    level = m.L;
  } else {
    throw std::invalid_argument("edge_paths: node " + std::to_string(target) + " is not a target");
  }
  std::map<Path, double> found;
  const int source_level = m.level[source];
  // The source's writes at `at`, through every path found down to it. A cross-layer feature's write into a
  // later layer's MLP output is the step (layer, -2) first.
  auto collect = [&](int at) {
    for (int64_t w : m.node_writes[source]) {
      if (m.write_level[w] != at) continue;
      for (const auto& [path, G] : paths) {
        Path steps(path.rbegin(), path.rend());
        if (at != source_level) steps.insert(steps.begin(), std::make_pair(at - 1, -2));
        found[steps] += m.contribution.row(w).dot(G.row(m.nodes[source].position));
      }
    }
  };
  if (level < source_level) return {};  // the source is above the target: no edge
  collect(level);
  while (level > source_level) {
    const int l = level - 1;
    std::map<Path, Mat> next;
    for (const auto& [path, G] : paths) {
      Path through_mlp = path;
      next[path] = G;
      if (m.has_mlp && m.W_skip[l].size()) {
        through_mlp.push_back({l, -1});
        const Mat Gs = m.mlp_norm[l].adjoint(G * m.W_skip[l].transpose());
        next[through_mlp] = Gs;
      }
    }
    paths.clear();
    for (const auto& [path, G] : next) {
      paths[path] = G;
      for (int h = 0; h < m.H; ++h) {
        Path p = path;
        p.push_back({l, h});
        paths[p] = m.attn_norm[l].adjoint(m.head_adjoint(l, h, G));
      }
    }
    level = l;
    collect(level);
  }
  std::vector<PathTerm> terms;
  for (const auto& [steps, weight] : found)
    if (weight != 0) terms.push_back({steps, weight});  // steps from the source up
  return terms;
}

QkAttribution LocalReplacement::qk_attribution(int layer, int head, int query, int key) const {
  const Impl& m = *impl_;
  if (layer < 0 || layer >= m.L || head < 0 || head >= m.H || query < 0 || query >= m.T || key < 0 ||
      key > query)
    throw std::invalid_argument("qk_attribution: expected a layer, head, query and a key at or before it");
  QkAttribution a;
  const int64_t N = size();
  for (int64_t i = 0; i < N; ++i)
    if (m.level[i] >= 0 && m.level[i] <= layer) a.sources.push_back(i);
  const int64_t S = static_cast<int64_t>(a.sources.size());
  const double inv = 1 / std::sqrt(static_cast<double>(m.dk));
  const auto Wq = m.Wq[layer].middleRows(head * m.dk, m.dk), Wk = m.Wk[layer].middleRows(head * m.dk, m.dk);
  // Each source's query and key vectors through the frozen attention norm (no bias), and the constant part's.
  Mat q(S, m.dk), k(S, m.dk);
  for (int64_t i = 0; i < S; ++i) {
    Vec e = Vec::Zero(N);
    e[a.sources[i]] = 1;
    Eigen::MatrixXd r;
    run(e, false, layer, &r);
    const Mat x = m.attn_norm[layer].forward(r, false);
    q.row(i) = x.row(query) * Wq.transpose();
    k.row(i) = x.row(key) * Wk.transpose();
  }
  Eigen::MatrixXd r0;
  run(Vec::Zero(N), true, layer, &r0);
  const Mat x0 = m.attn_norm[layer].forward(r0, true);
  Vec q0 = (x0.row(query) * Wq.transpose()).transpose(), k0 = (x0.row(key) * Wk.transpose()).transpose();
  if (m.bq[layer].size()) q0 += m.bq[layer].segment(head * m.dk, m.dk);
  if (m.bk[layer].size()) k0 += m.bk[layer].segment(head * m.dk, m.dk);
  a.terms = q * k.transpose() * inv;  // (query-side source, key-side source)
  const Vec q_sum = q.colwise().sum().transpose(), k_sum = k.colwise().sum().transpose();
  a.rest = (q0.dot(k_sum) + q_sum.dot(k0) + q0.dot(k0)) * inv;
  a.score = m.scores[layer](head * m.T + query, key);
  return a;
}

namespace {

// The score below which nodes (or edges) are dropped so the rest keep `threshold` of the total
// (circuit-tracer's find_threshold).
double find_threshold(std::vector<double> scores, double threshold) {
  std::sort(scores.begin(), scores.end(), std::greater<double>());
  double total = 0;
  for (double s : scores) total += s;
  if (!(total > 0)) return 0;
  double cum = 0;
  size_t i = 0;
  for (; i < scores.size(); ++i) {
    cum += scores[i];
    if (cum / total >= threshold) break;
  }
  return scores[std::min(i, scores.size() - 1)];
}

Eigen::MatrixXd normalize_rows(const Eigen::MatrixXd& A) {
  Eigen::MatrixXd n = A.cwiseAbs();
  for (int64_t r = 0; r < n.rows(); ++r) n.row(r) /= std::max(n.row(r).sum(), 1e-10);
  return n;
}

// w A + w A^2 + ... (A nilpotent: the graph has no cycle).
Eigen::VectorXd influence_of(const Eigen::MatrixXd& A, const Eigen::VectorXd& w) {
  Eigen::RowVectorXd current = w.transpose() * A, total = current;
  for (int i = 0; i < 1000 && current.cwiseAbs().maxCoeff() > 0; ++i) {
    current = current * A;
    total += current;
  }
  return total.transpose();
}

}  // namespace

GraphScores score_graph(const Eigen::MatrixXd& A, const Eigen::VectorXd& w, int64_t n_features,
                        int64_t n_errors, int64_t n_tokens, int64_t n_logits, double node_threshold,
                        double edge_threshold) {
  const int64_t N = A.rows(), error_end = n_features + n_errors, token_end = error_end + 2 * n_tokens;
  GraphScores s;
  const Eigen::MatrixXd normalized = normalize_rows(A);
  s.influence = influence_of(normalized, w);
  const double threshold =
      find_threshold(std::vector<double>(s.influence.data(), s.influence.data() + N), node_threshold);
  s.node_kept.assign(N, 0);
  for (int64_t i = 0; i < N; ++i) s.node_kept[i] = s.influence[i] >= threshold || i >= error_end;
  Eigen::MatrixXd pruned = A;
  for (int64_t i = 0; i < N; ++i)
    if (!s.node_kept[i]) {
      pruned.row(i).setZero();
      pruned.col(i).setZero();
    }
  const Eigen::MatrixXd np = normalize_rows(pruned);
  const Eigen::VectorXd pi = influence_of(np, w) + w;
  const Eigen::MatrixXd edge_scores = pi.asDiagonal() * np;
  const double edge_cut = find_threshold(
      std::vector<double>(edge_scores.data(), edge_scores.data() + edge_scores.size()), edge_threshold);
  s.edge_kept = (edge_scores.array() >= edge_cut).cast<char>();
  // Feature and error nodes keep an outgoing edge, features an incoming one, until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (int64_t i = 0; i < N; ++i) {
      if (!s.node_kept[i]) {
        s.edge_kept.row(i).setZero();
        s.edge_kept.col(i).setZero();
      }
    }
    for (int64_t i = 0; i < error_end; ++i) {
      if (!s.node_kept[i]) continue;
      bool out = false, in = i >= n_features;
      for (int64_t t = 0; t < N && !out; ++t) out = s.edge_kept(t, i);
      for (int64_t c = 0; c < N && !in; ++c) in = s.edge_kept(i, c);
      if (!out || !in) {
        s.node_kept[i] = 0;
        changed = true;
      }
    }
  }
  // Cumulative influence: each node's share of the total counting every node at least as influential.
  std::vector<int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s.influence[a] > s.influence[b]; });
  const double total = s.influence.sum();
  s.cumulative = Eigen::VectorXd::Zero(N);
  double cum = 0;
  for (int64_t i : order) {
    cum += s.influence[i];
    s.cumulative[i] = total > 0 ? cum / total : 0;
  }
  // Replacement: the tokens' share of the influence that tokens and errors have; completeness: the share of
  // each node's normalised input that is not from errors, weighted by the node's influence on the output.
  const double token_influence = s.influence.segment(error_end, token_end - error_end).sum();
  const double error_influence = s.influence.segment(n_features, n_errors).sum();
  s.replacement =
      token_influence + error_influence > 0 ? token_influence / (token_influence + error_influence) : 1;
  const Eigen::VectorXd non_error =
      Eigen::VectorXd::Ones(N) - normalized.middleCols(n_features, n_errors).rowwise().sum();
  const Eigen::VectorXd output = s.influence + w;
  s.completeness = output.sum() > 0 ? non_error.dot(output) / output.sum() : 1;
  (void)n_logits;
  return s;
}

std::string npy_bytes(const Eigen::MatrixXd& m) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(m.rows()) +
                       ", " + std::to_string(m.cols()) + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const uint16_t len = static_cast<uint16_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += header;
  const Mat rows = m;  // C order
  out.append(reinterpret_cast<const char*>(rows.data()), static_cast<size_t>(rows.size()) * sizeof(double));
  return out;
}

namespace {

// The request's thresholds and save name, checked before any work.
void check_graph_request(const GraphRequest& request) {
  if (!(request.node_threshold >= 0 && request.node_threshold <= 1))
    throw analysis::RequestError("node_threshold: expected 0..1, got " +
                                 std::to_string(request.node_threshold));
  if (!(request.edge_threshold >= 0 && request.edge_threshold <= 1))
    throw analysis::RequestError("edge_threshold: expected 0..1, got " +
                                 std::to_string(request.edge_threshold));
  if (!request.save.empty()) {
    const std::string problem = analysis::save_name_problem(request.save);
    if (!problem.empty()) throw analysis::RequestError("save: " + problem);
  }
}

// The head and key of the QK attribution asked for (layer -1: none), checked against the model and the
// input's length.
struct QkRequest {
  int layer = -1, head = 0, key = 0;
};
QkRequest parse_qk(const std::string& qk, const nn::ModelShape& shape, size_t n_ids) {
  QkRequest q;
  if (!qk.empty()) {
    int n = 0;
    if (std::sscanf(qk.c_str(), "%d.%d.%d%n", &q.layer, &q.head, &q.key, &n) != 3 ||
        n != static_cast<int>(qk.size()) || q.layer < 0 || q.layer >= static_cast<int>(shape.n_layers) ||
        q.head < 0 || q.head >= shape.n_heads || q.key < 0 || q.key >= static_cast<int>(n_ids))
      throw analysis::RequestError("qk: expected LAYER.HEAD.KEY of this model and input (layers 0.." +
                                   std::to_string(shape.n_layers - 1) + ", heads 0.." +
                                   std::to_string(shape.n_heads - 1) + ", key positions 0.." +
                                   std::to_string(n_ids - 1) + "), got '" + qk + "'");
  }
  // The QK attribution splits q . k / sqrt(dk) into the source nodes' bilinear terms through Wq and Wk:
  // a rotation by position, a norm of q and k, or another scale is not in that split.
  if (!qk.empty() && (shape.positions == nn::PositionKind::rotary || shape.qk_norm ||
                      shape.attn_scale != nn::AttnScale::sqrt_dk))
    throw analysis::RequestError(std::string("qk: not computed for a model with ") +
                                 (shape.positions == nn::PositionKind::rotary ? "model.positions \"rotary\""
                                  : shape.qk_norm                             ? "model.qk_norm"
                                                                              : "model.attn_scale \"none\"") +
                                 " (the split is of q k^T / sqrt(dk) through Wq and Wk)");
  return q;
}

// Each MLP layer's transcoder from the request's folder (the run's by default), its file named in g;
// none for an attention-only model. *folder_read: the folder read, left empty when none.
std::vector<LayerTranscoder> graph_transcoders(const analysis::StudyRun& run, const GraphRequest& request,
                                               findings::AttributionGraph& g, std::string* folder_read) {
  const nn::CausalLM<float>& model = *run.model;
  std::vector<LayerTranscoder> transcoders(static_cast<size_t>(model.shape.n_layers));
  if (model.shape.attention_only) {
    if (!request.transcoders.empty())
      throw analysis::RequestError("transcoders: the model is attention-only: it has no MLP to replace");
  } else {
    const std::string folder =
        request.transcoders.empty() ? io::layout::transcoders_root(run.dir) : request.transcoders;
    *folder_read = folder;
    const std::vector<dictionary::SaeParams<float>> params = dictionary::load_transcoders(model, folder);
    for (size_t l = 0; l < params.size(); ++l) {
      const std::string path =
          io::layout::transcoder_model(io::layout::transcoder_dir(folder, static_cast<int>(l)));
      const train::SafetensorsFile header = train::read_safetensors_header(path);
      const dictionary::SaeConfig c = dictionary::sae_config_from_json(
          io::parse_json(train::metadata_string(header, "config", path), path + " (config)"),
          path + " (config)");
      transcoders[l] = {params[l], c.activation, c.k};
      g.transcoders.push_back(path);
    }
  }
  return transcoders;
}

// The target logits: the one asked for, or the most likely up to cumulative probability 0.95; with their
// probabilities.
void pick_targets(const analysis::StudyRun& run, const GraphRequest& request, const std::vector<int32_t>& ids,
                  std::vector<int32_t>& targets, std::vector<double>& weights) {
  const nn::CausalLM<float>& model = *run.model;
  {
    ag::NoGradScope no_grad;
    const int64_t T = static_cast<int64_t>(ids.size());
    const ag::Tensor<float> logits = model.forward(ids, 1, T);
    const int64_t V = logits.size(2);
    const float* row = logits.data() + (T - 1) * V;
    const double mx = *std::max_element(row, row + V);
    std::vector<double> p(V);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += p[v] = std::exp(double(row[v]) - mx);
    for (double& v : p) v /= z;
    if (!request.target.empty()) {
      const int id = analysis::token_id(run, request.target, "target");
      targets = {id};
      weights = {p[id]};
    } else {
      std::vector<int32_t> order(V);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
      double cum = 0;
      for (int i = 0; i < std::min<int64_t>(kMaxLogits, V); ++i) {
        targets.push_back(order[i]);
        weights.push_back(p[order[i]]);
        cum += p[order[i]];
        if (cum >= kLogitProbability) break;
      }
    }
  }
}

// Each feature node's top and bottom logit effects (kLogitEffects each).
void add_logit_effects(findings::AttributionGraph& g, const LocalReplacement& rm,
                       const analysis::StudyRun& run) {
  const Eigen::MatrixXd effects = rm.feature_logit_effects();
  const int64_t V = effects.cols(), shown = std::min<int64_t>(kLogitEffects, V);
  std::vector<int64_t> order(V);
  for (int64_t i = 0; i < rm.n_features(); ++i) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return effects(i, a) > effects(i, b); });
    for (int64_t k = 0; k < shown; ++k) {
      g.nodes[i].top_logits.push_back(
          {analysis::token_label(run, static_cast<int>(order[k])), effects(i, order[k])});
      const int64_t low = order[V - 1 - k];
      g.nodes[i].bottom_logits.push_back(
          {analysis::token_label(run, static_cast<int>(low)), effects(i, low)});
    }
  }
}

// Each feature's top examples from its layer's feature page, when `attograd transcoder` wrote one.
void add_feature_examples(findings::AttributionGraph& g, const LocalReplacement& rm,
                          const std::string& transcoder_folder) {
  std::map<int, std::optional<std::map<int64_t, std::vector<findings::GraphExample>>>> pages;
  for (int64_t i = 0; i < rm.n_features(); ++i) {
    GraphNode& n = g.nodes[i];
    auto it = pages.find(n.layer);
    if (it == pages.end())
      it = pages.emplace(n.layer, read_feature_examples(transcoder_folder, n.layer)).first;
    if (!it->second) continue;
    n.has_page = true;
    const auto f = it->second->find(n.index);
    if (f != it->second->end()) n.examples = f->second;
  }
}

// The kept edges between kept nodes, each with its split by path (through heads, skips and MLPs).
void add_links(findings::AttributionGraph& g, const LocalReplacement& rm, const Eigen::MatrixXd& A,
               const GraphScores& s) {
  for (int64_t t = 0; t < A.rows(); ++t)
    for (int64_t c = 0; c < A.cols(); ++c)
      if (s.edge_kept(t, c) && s.node_kept[t] && s.node_kept[c] && A(t, c) != 0) {
        findings::GraphLink link{c, t, A(t, c), {}};
        for (const PathTerm& term : rm.edge_paths(t, c)) {
          std::string name;
          for (const auto& [layer, head] : term.steps)
            name += (name.empty() ? "L" : ">L") + std::to_string(layer) +
                    (head == -1   ? std::string(".skip")
                     : head == -2 ? std::string(".mlp")
                                  : ".H" + std::to_string(head));
          link.paths.push_back({name.empty() ? "resid" : name, term.weight});
        }
        g.links.push_back(std::move(link));
      }
}

// The QK attribution of head q.head of layer q.layer from the last of n_ids positions to q.key, with its
// kQkTerms largest source-pair terms.
findings::GraphQk qk_of(const LocalReplacement& rm, const QkRequest& q, size_t n_ids) {
  const QkAttribution a = rm.qk_attribution(q.layer, q.head, static_cast<int>(n_ids) - 1, q.key);
  findings::GraphQk v{q.layer,       q.head, static_cast<int>(n_ids) - 1, q.key, a.score, a.rest,
                      a.terms.sum(), {}};
  std::vector<std::tuple<int64_t, int64_t, double>> all;
  for (int64_t i = 0; i < a.terms.rows(); ++i)
    for (int64_t j = 0; j < a.terms.cols(); ++j) all.emplace_back(a.sources[i], a.sources[j], a.terms(i, j));
  std::stable_sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
    return std::abs(std::get<2>(x)) > std::abs(std::get<2>(y));
  });
  all.resize(std::min<size_t>(all.size(), kQkTerms));
  v.top = all;
  return v;
}

// graph.json, adjacency.npy and graph.html in the run's folder for graph `name`, and the run's report;
// returns the files written.
std::vector<std::string> save_graph(const analysis::StudyRun& run, const std::string& name,
                                    const findings::AttributionGraph& g, const Eigen::MatrixXd& A) {
  const io::RunLock lock(run.dir);
  const std::string dir = io::layout::graph_dir(run.dir, name);
  io::check_folder_below_run(run.dir, dir);
  std::filesystem::create_directories(dir);
  io::write_text_file_atomically(io::layout::graph_json(dir), findings::graph_to_json(g).dump() + "\n");
  io::write_text_file_atomically(io::layout::graph_matrix(dir), npy_bytes(A));
  io::write_text_file_atomically(io::layout::graph_page(dir), findings::graph_html(g));
  analysis::write_run_report(run.dir,
                             run.config.name);  // its "Attribution graphs" section links the viewer
  return {io::layout::graph_json(dir), io::layout::graph_matrix(dir), io::layout::graph_page(dir),
          io::layout::report_html(run.dir)};
}

}  // namespace

analysis::Output<findings::AttributionGraph> graph(analysis::StudyRun& run, const GraphRequest& request) {
  check_graph_request(request);
  analysis::Output<findings::AttributionGraph> out;
  const std::vector<int32_t> ids =
      analysis::input_ids(run, request.input, "input", analysis::Bos::kAdd, &out.notes);
  const QkRequest qk = parse_qk(request.qk, run.model->shape, ids.size());
  const nn::CausalLM<float>& model = *run.model;
  findings::AttributionGraph& g = out.result;
  std::string transcoder_folder;
  const std::vector<LayerTranscoder> transcoders = graph_transcoders(run, request, g, &transcoder_folder);
  std::vector<int32_t> targets;
  std::vector<double> weights;
  pick_targets(run, request, ids, targets, weights);
  const LocalReplacement rm(model, ids, transcoders, targets, weights);
  const Eigen::MatrixXd A = rm.adjacency();
  const GraphScores s = score_graph(A, rm.logit_weights(), rm.n_features(), rm.n_errors(), rm.n_tokens(),
                                    rm.n_logits(), request.node_threshold, request.edge_threshold);
  g.run = run.config.name;
  g.slug = run.config.name;
  g.prompt_tokens = analysis::token_labels(run, ids);
  g.n_layers = static_cast<int>(model.shape.n_layers);
  g.nodes = rm.nodes();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    findings::GraphNode& n = g.nodes[i];
    n.influence = s.cumulative[static_cast<int64_t>(i)];
    n.kept = s.node_kept[i];
    if (n.kind == GraphNodeKind::embedding || n.kind == GraphNodeKind::logit)
      n.token = analysis::token_label(run, static_cast<int>(n.index));
  }
  g.n_features = rm.n_features();
  g.n_errors = rm.n_errors();
  g.n_tokens = rm.n_tokens();
  g.n_logits = rm.n_logits();
  g.unpruned_edges = (A.array() != 0).count();
  g.edges.reserve(static_cast<size_t>(g.unpruned_edges));
  for (int64_t t = 0; t < A.rows(); ++t)
    for (int64_t c = 0; c < A.cols(); ++c)
      if (A(t, c) != 0) g.edges.push_back({static_cast<int32_t>(c), static_cast<int32_t>(t), A(t, c)});
  add_logit_effects(g, rm, run);
  if (!transcoder_folder.empty()) add_feature_examples(g, rm, transcoder_folder);
  add_links(g, rm, A, s);
  if (qk.layer >= 0) g.qk.push_back(qk_of(rm, qk, ids.size()));
  g.node_threshold = request.node_threshold;
  g.edge_threshold = request.edge_threshold;
  g.replacement_score = s.replacement;
  g.completeness_score = s.completeness;
  if (!request.save.empty()) out.wrote = save_graph(run, request.save, g, A);
  return out;
}

}  // namespace attribution
