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
#include "autograd/ops.h"
#include "dictionary/transcoder.h"
#include "findings/graph_html.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/hooks.h"
#include "nn/model_copy.h"
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

namespace {

using Tensor = ag::Tensor<double>;

// Rows per batched run (targets in adjacency, routes in edge_paths: each row a copy of the prompt): as many
// as keep one (rows, T, D) activation near kBatchElements doubles, between kMinBatch and kMaxBatch. Fewer
// runs of more rows spend less on each op's fixed cost.
constexpr int64_t kBatchElements = int64_t(1) << 19, kMinBatch = 8, kMaxBatch = 64;
size_t batch_rows(int64_t T, int64_t D) {
  return static_cast<size_t>(std::clamp(kBatchElements / (T * D), kMinBatch, kMaxBatch));
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

// A constant tensor holding a matrix.
Tensor tensor_of(const Mat& m) {
  Tensor t = Tensor::empty({m.rows(), m.cols()});
  Eigen::Map<Mat>(t.data(), m.rows(), m.cols()) = m;
  return t;
}

// `one` (1, ...) repeated `rows` times along its first axis: a frozen value for a batch of rows.
Tensor repeat_rows(const Tensor& one, int64_t rows) {
  ag::Shape shape = one.shape();
  shape[0] = rows;
  Tensor out = Tensor::empty(shape);
  const int64_t n = one.numel();
  for (int64_t r = 0; r < rows; ++r) std::copy(one.data(), one.data() + n, out.data() + r * n);
  return out;
}

// A (rows, 1, ..., 1) constant (`ones` trailing axes of 1) with flag[r] ? 1 : 0, or 1 - that.
Tensor row_mask(const std::vector<char>& flag, int ones, bool inverted) {
  ag::Shape shape(static_cast<size_t>(ones) + 1, 1);
  shape[0] = static_cast<int64_t>(flag.size());
  Tensor t = Tensor::empty(shape);
  for (size_t r = 0; r < flag.size(); ++r) t.data()[r] = (flag[r] != 0) != inverted ? 1.0 : 0.0;
  return t;
}

// v with its gradient passed only where `pass` is 1 (`block` is 1 - pass): v * pass + detach(v) * block,
// which is v itself, element for element.
Tensor pass_only(const Tensor& v, const Tensor& pass, const Tensor& block) {
  return v * pass + v.detach() * block;
}

}  // namespace

// A route through the layers for each row of a batch (edge_paths): at each layer, the head whose output
// carries the gradient at the attention stage (-1: the stream itself) and whether the MLP stage carries it
// through the transcoder's skip (else the stream itself). Each row's gradient at the stream is one path's.
struct LocalReplacement::Routes {
  std::vector<std::vector<int>> head;   // [layer][row]
  std::vector<std::vector<char>> skip;  // [layer][row]
};

struct LocalReplacement::Impl {
  int L = 0, T = 0, D = 0, H = 0, dk = 0;
  bool has_mlp = false, learned_positions = false;
  std::unique_ptr<nn::CausalLM<double>> model;  // the model in float64: the replacement runs its forward
  std::vector<int32_t> ids;
  std::vector<char> parallel;             // per layer: the MLP reads the block's input, as attention does
  std::vector<std::vector<int>> kv_head;  // per layer, each query head's kv head
  // Frozen on the prompt, by hook point: each layer's attention pattern and each norm's scale, (1, ...).
  std::vector<std::pair<std::string, Tensor>> frozen;
  std::vector<Mat> scores;  // per layer, (H * T, T): the model's attention scores on the prompt
  // The final norm frozen at the last position (a feature's logit effects read its decoder through it).
  bool final_normalises = false, final_centres = false;
  double final_scale = 1;
  Vec final_weight;
  std::vector<GraphNode> nodes;
  int64_t n_features = 0, n_errors = 0, n_logits = 0;
  // Per MLP layer: the transcoder, and the error (T, D). W_dec[l] (M, writes[l] * D): a cross-layer
  // transcoder's layer l writes to the MLP outputs of layers l .. l + writes[l] - 1.
  std::vector<Mat> W_enc, W_dec, error;
  std::vector<Vec> b_enc;
  std::vector<Tensor> W_skip, b_dec;  // as the spliced MLPs use them; W_skip undefined: no skip
  std::vector<int> writes;
  Mat unembed;        // (K, D): the targets' demeaned unembedding rows
  Mat vocab_unembed;  // (V, D): every token's demeaned unembedding row
  Vec unembed_bias;
  // Each write of a source node into the residual stream: the vector, the node, the level it writes at (0:
  // the stream entering layer 0, l + 1: layer l's MLP output), at the node's position. A node writes once,
  // but a cross-layer transcoder's feature writes once per MLP output it reaches. level[node] is its lowest.
  Mat contribution;  // (writes, D)
  std::vector<int64_t> write_node;
  std::vector<int> write_level;
  std::vector<std::vector<int64_t>> node_writes;  // per node, its writes
  std::vector<int> level;
  std::vector<std::vector<int64_t>> level_writes;  // per level, its writes
  // Per level and position, its writes and their vectors as rows (writes there, D).
  std::vector<std::vector<std::vector<int64_t>>> position_writes;
  std::vector<std::vector<Mat>> position_vectors;
  Vec values;

  // The constructor's steps, in its order (each reads what the ones before it set).
  // The model's forward on the prompt, capturing what the replacement freezes and reads; returns the
  // unembedding's input (1, T, D).
  Tensor capture(nn::Hooks<double>& hooks, const nn::CausalLM<float>& model_f,
                 const nn::ModelView<double>& mv);
  // With MLPs, each layer's transcoder and error and a node per active feature, by (layer, position,
  // feature); returns each layer's feature pre-activations (T, M) (none without MLPs).
  std::vector<Mat> add_feature_nodes(const nn::CausalLM<float>& model_f,
                                     const std::vector<LayerTranscoder>& transcoders,
                                     const nn::Hooks<double>& hooks);
  // The error nodes (with MLPs), then the token and position embeddings' nodes.
  void add_error_and_input_nodes();
  // The target logits' nodes, demeaned over the vocabulary.
  void add_logit_nodes(const nn::ModelView<double>& mv, const std::vector<int32_t>& targets,
                       const std::vector<double>& target_weights, int64_t V);
  // Each source's writes and level (the token's write is the stream entering layer 0 less the learned
  // position's), each level's rows, and each target's value in the model itself.
  void add_contributions(const std::vector<Mat>& pre, const Tensor& final_in, const nn::Hooks<double>& hooks);

  // One batched run of the replacement: per MLP layer its input (B, T, D), which the transcoder and its
  // features read, the unembedding's input (B, T, D), and per level with writes, when asked for, a zero
  // probe added to the stream there (B, T, D) whose gradient is the stream's.
  struct Pass {
    std::vector<Tensor> mlp_in;
    Tensor final_in;
    std::vector<Tensor> probe;
  };
  // The replacement model, run by the model's own forward on B copies of the prompt with row b's sources
  // scaled by rows(b, node) (B, nodes): the stream entering layer 0 is the level-0 writes; the patterns and
  // norm scales are the prompt's (the patterns spliced in, or with `qk` patched in after q, k and the scores
  // are computed); each MLP is spliced out for its transcoder's skip, b_dec and its level's writes
  // (features' and errors'); the unembedding is not run. With `routes`, each row's gradient follows its
  // route only (values unchanged). `hooks` may hold the caller's captures.
  Pass run(const Mat& rows, bool probes, const Routes* routes, bool qk, nn::Hooks<double>& hooks) const;
  // Each level's writes scaled by rows(b, node), placed in the stream: (B, T, D); undefined without writes.
  std::vector<Tensor> writes_in_stream(const Mat& rows) const;
  // f(b, write, d value / d write's multiplier) for every write and row, from the probes' gradients.
  template <typename F>
  void for_each_write_gradient(const Pass& pass, F f) const;
  // Row b's target values (features: pre-activation; logits: demeaned, before any softcap).
  Vec target_values(const Pass& pass, int64_t b) const;
  // The backward of row b's target targets[b] (its value's gradient, seeded at what it reads: a feature its
  // layer's MLP input, a logit the unembedding's input at the last position), for every row at once.
  void backward_from(const Pass& pass, const std::vector<int64_t>& targets) const;
  // The hooks that keep each row's gradient on its route.
  void add_route_hooks(const Routes& routes, int64_t B, nn::Hooks<double>& hooks,
                       std::shared_ptr<std::vector<Tensor>> live) const;
  // The transcoder's skip of layer l on x: its gradient cut for the rows whose route does not pass it.
  Tensor skip(int l, const Tensor& x, const Routes* routes) const;
};

LocalReplacement::~LocalReplacement() = default;

Tensor LocalReplacement::Impl::capture(nn::Hooks<double>& hooks, const nn::CausalLM<float>& model_f,
                                       const nn::ModelView<double>& mv) {
  std::vector<std::string> to_freeze;  // the patterns and the norms' scales
  auto freeze = [&](const std::string& point) {
    hooks.capture(point);
    to_freeze.push_back(point);
  };
  for (int l = 0; l < L; ++l) {
    const nn::BlockView<double>& block = mv.layers[l];
    const size_t ul = static_cast<size_t>(l);
    parallel.push_back(block.parallel);
    kv_head.emplace_back();
    for (int h = 0; h < H; ++h) kv_head.back().push_back(static_cast<int>(block.attention.kv_head(h)));
    freeze(nn::hook_name(nn::Point::attn_pattern, ul));
    hooks.capture(nn::hook_name(nn::Point::attn_scores, ul));
    if (block.attn_in.norm.normalises) freeze(nn::hook_name(block.attn_in.norm.scale_point, ul));
    if (!has_mlp) continue;
    if (block.mlp_in.norm.normalises) freeze(nn::hook_name(block.mlp_in.norm.scale_point, ul));
    hooks.capture(dictionary::transcoder_in_point(model_f, l));
    hooks.capture(nn::hook_name(nn::Point::mlp_out, ul));
  }
  final_normalises = mv.final_read.norm.normalises;
  final_centres = mv.final_read.norm.centres;
  if (final_normalises) freeze(nn::hook_name(mv.final_read.norm.scale_point));
  if (mv.final_read.norm.weight.defined()) final_weight = to_vec(mv.final_read.norm.weight);
  hooks.capture(nn::hook_name(nn::Point::resid_pre, 0));
  if (mv.position_embedding.defined()) hooks.capture(nn::hook_name(nn::Point::pos_embed));
  Tensor final_in;
  hooks.splice("logits", [&final_in](const Tensor& x) { return final_in = x; });
  {
    ag::NoGradScope no_grad;
    model->forward(ids, 1, T, {}, &hooks);
  }
  for (const std::string& point : to_freeze) frozen.emplace_back(point, hooks.captured(point));
  for (int l = 0; l < L; ++l)
    scores.push_back(Eigen::Map<const Mat>(
        hooks.captured(nn::hook_name(nn::Point::attn_scores, static_cast<size_t>(l))).data(), H * T, T));
  if (final_normalises)
    final_scale = hooks.captured(nn::hook_name(mv.final_read.norm.scale_point)).data()[T - 1];
  return final_in;
}

std::vector<Mat> LocalReplacement::Impl::add_feature_nodes(const nn::CausalLM<float>& model_f,
                                                           const std::vector<LayerTranscoder>& transcoders,
                                                           const nn::Hooks<double>& hooks) {
  std::vector<Mat> pre(L);
  if (!has_mlp) return pre;
  W_enc.resize(L);
  W_dec.resize(L);
  W_skip.resize(L);
  error.resize(L);
  b_enc.resize(L);
  b_dec.resize(L);
  writes.assign(L, 1);
  std::vector<Mat> acts(L), xs(L), skips(L);
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
    const Vec bd = to_vec(tc.params.b_dec);
    b_dec[l] = Tensor::from({D}, std::vector<double>(bd.data(), bd.data() + D));
    if (tc.params.W_skip.defined()) {
      skips[l] = to_mat(tc.params.W_skip, D, D);
      W_skip[l] = tensor_of(skips[l]);
    }
    const Mat x = to_mat(hooks.captured(dictionary::transcoder_in_point(model_f, l)), T, D);
    pre[l] = x * W_enc[l];
    pre[l].rowwise() += b_enc[l].transpose();
    acts[l] = transcoder_activations(tc, pre[l]);
    xs[l] = x;
  }
  for (int l = 0; l < L; ++l) {
    // Layer l's MLP output as the transcoders write it: b_dec, the skip, and the decoder rows of every
    // layer at or below it that reaches it; the error is the rest.
    Mat out = Mat::Zero(T, D);
    out.rowwise() += Eigen::Map<const Vec>(b_dec[l].data(), D).transpose();
    if (skips[l].size()) out += xs[l] * skips[l];
    for (int l0 = 0; l0 <= l; ++l0)
      if (l0 + writes[l0] > l) out += acts[l0] * W_dec[l0].middleCols((l - l0) * D, D);
    error[l] = to_mat(hooks.captured(nn::hook_name(nn::Point::mlp_out, static_cast<size_t>(l))), T, D) - out;
  }
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < T; ++t)
      for (int64_t j = 0; j < acts[l].cols(); ++j)
        if (acts[l](t, j) > 0) {
          GraphNode n;
          n.kind = GraphNodeKind::feature;
          n.layer = l;
          n.position = t;
          n.index = j;
          n.activation = acts[l](t, j);
          nodes.push_back(n);
        }
  return pre;
}

void LocalReplacement::Impl::add_error_and_input_nodes() {
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
    if (targets[k] < 0 || targets[k] >= V) throw std::invalid_argument("graph: target id out of range");
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

void LocalReplacement::Impl::add_contributions(const std::vector<Mat>& pre, const Tensor& final_in,
                                               const nn::Hooks<double>& hooks) {
  const int64_t N = static_cast<int64_t>(nodes.size());
  // The stream entering layer 0 is the token's embedding plus the learned position's, if any.
  const Mat stream = to_mat(hooks.captured(nn::hook_name(nn::Point::resid_pre, 0)), T, D);
  const Mat pos =
      learned_positions ? to_mat(hooks.captured(nn::hook_name(nn::Point::pos_embed)), T, D) : Mat::Zero(T, D);
  const Mat tok = stream - pos;
  int64_t n_writes = N - n_logits;
  for (int64_t i = 0; i < n_features; ++i) n_writes += writes[nodes[i].layer] - 1;
  contribution = Mat::Zero(n_writes, D);
  node_writes.assign(N, {});
  level.assign(N, -1);
  auto add_write = [&](int64_t node, int at_level, const auto& row) {
    node_writes[node].push_back(static_cast<int64_t>(write_node.size()));
    contribution.row(static_cast<int64_t>(write_node.size())) = row;
    write_node.push_back(node);
    write_level.push_back(at_level);
    if (level[node] < 0) level[node] = at_level;
  };
  for (int64_t i = 0; i < N; ++i) {
    const GraphNode& n = nodes[i];
    switch (n.kind) {
      case GraphNodeKind::feature:
        for (int w = 0; w < writes[n.layer]; ++w)
          add_write(i, n.layer + w + 1, n.activation * W_dec[n.layer].row(n.index).segment(w * D, D));
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
        break;
    }
  }
  level_writes.assign(L + 1, {});
  for (size_t w = 0; w < write_node.size(); ++w)
    level_writes[write_level[w]].push_back(static_cast<int64_t>(w));
  position_writes.assign(L + 1, std::vector<std::vector<int64_t>>(static_cast<size_t>(T)));
  position_vectors.assign(L + 1, std::vector<Mat>(static_cast<size_t>(T)));
  for (int lv = 0; lv <= L; ++lv)
    for (int64_t w : level_writes[lv]) position_writes[lv][nodes[write_node[w]].position].push_back(w);
  for (int lv = 0; lv <= L; ++lv)
    for (int at = 0; at < T; ++at) {
      const std::vector<int64_t>& ws = position_writes[lv][at];
      position_vectors[lv][at] = Mat(static_cast<int64_t>(ws.size()), D);
      for (size_t j = 0; j < ws.size(); ++j)
        position_vectors[lv][at].row(static_cast<int64_t>(j)) = contribution.row(ws[j]);
    }
  // Each target's value in the model itself: a feature's pre-activation, a logit demeaned before any softcap.
  values = Vec::Zero(N);
  for (int64_t i = 0; i < n_features; ++i) values[i] = pre[nodes[i].layer](nodes[i].position, nodes[i].index);
  const Mat xf = to_mat(final_in, T, D);
  for (int64_t k = 0; k < n_logits; ++k)
    values[N - n_logits + k] = xf.row(T - 1).dot(unembed.row(k)) + unembed_bias[k];
}

std::vector<Tensor> LocalReplacement::Impl::writes_in_stream(const Mat& rows) const {
  std::vector<Tensor> out(level_writes.size());
  const int64_t B = rows.rows();
  // Rows all alike (every source at 1, as for the adjacency and the paths): one row, repeated.
  const bool alike = B > 1 && (rows.rowwise() - rows.row(0)).cwiseAbs().maxCoeff() == 0;
  const int64_t computed = alike ? 1 : B;
  for (size_t lv = 0; lv < level_writes.size(); ++lv) {
    if (level_writes[lv].empty()) continue;
    Tensor t = Tensor::zeros({computed, T, D});
    for (int64_t w : level_writes[lv]) {
      const int64_t node = write_node[w], at = nodes[node].position;
      for (int64_t b = 0; b < computed; ++b)
        if (rows(b, node) != 0)
          Eigen::Map<Vec>(t.data() + (b * T + at) * D, D) += rows(b, node) * contribution.row(w).transpose();
    }
    out[lv] = alike ? repeat_rows(t, B) : t;
  }
  return out;
}

template <typename F>
void LocalReplacement::Impl::for_each_write_gradient(const Pass& pass, F f) const {
  using Strided = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  for (size_t lv = 0; lv < level_writes.size(); ++lv) {
    if (!pass.probe[lv].defined()) continue;
    const Tensor g = pass.probe[lv].grad_tensor();
    const int64_t B = g.size(0);
    // Position by position: the writes there (their vectors as rows) times the stream's gradient there.
    for (int64_t at = 0; at < T; ++at) {
      const std::vector<int64_t>& ws = position_writes[lv][at];
      if (ws.empty()) continue;
      const Mat products = position_vectors[lv][at] *
                           Strided(g.data() + at * D, B, D, Eigen::OuterStride<>(T * D)).transpose();
      for (size_t j = 0; j < ws.size(); ++j)
        for (int64_t b = 0; b < B; ++b) f(b, ws[j], products(static_cast<int64_t>(j), b));
    }
  }
}

Tensor LocalReplacement::Impl::skip(int l, const Tensor& x, const Routes* routes) const {
  if (!routes) return ag::matmul(x, W_skip[l]);
  const std::vector<char>& on = routes->skip[l];
  return ag::matmul(pass_only(x, row_mask(on, 2, false), row_mask(on, 2, true)), W_skip[l]);
}

void LocalReplacement::Impl::add_route_hooks(const Routes& routes, int64_t B, nn::Hooks<double>& hooks,
                                             std::shared_ptr<std::vector<Tensor>> live) const {
  live->assign(2 * static_cast<size_t>(L), Tensor());  // per layer: the stream entering it, and resid_mid
  for (int l = 0; l < L; ++l) {
    const size_t ul = static_cast<size_t>(l);
    // Attention: only the route's head carries the gradient (none: -1)...
    Tensor heads = Tensor::zeros({B, 1, H, 1});
    std::vector<char> stream(static_cast<size_t>(B)), mlp_stream(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const int h = routes.head[l][b];
      if (h >= 0) heads.data()[b * H + h] = 1;
      stream[b] = h < 0;
      mlp_stream[b] = !routes.skip[l][b];
    }
    Tensor heads_off = Tensor::empty({B, 1, H, 1});
    for (int64_t i = 0; i < B * H; ++i) heads_off.data()[i] = 1 - heads.data()[i];
    hooks.add(nn::hook_name(nn::Point::attn_z, ul),
              [heads, heads_off](const Tensor& z) { return pass_only(z, heads, heads_off); });
    hooks.add(nn::hook_name(nn::Point::resid_pre, ul), [live, l](const Tensor& v) {
      (*live)[2 * l] = v;
      return v;
    });
    // ... and the stream past attention only when the route takes no head: resid_mid is resid_pre + attn_out,
    // and resid_pre's share is cut as (detach(resid_pre) - resid_pre) * cut, zero in value.
    const Tensor cut = row_mask(stream, 2, true);
    hooks.add(nn::hook_name(nn::Point::resid_mid, ul), [live, l, cut](const Tensor& v) {
      const Tensor& p = (*live)[2 * l];
      return (*live)[2 * l + 1] = v + (p.detach() - p) * cut;
    });
    if (!has_mlp) continue;
    // The MLP stage: the stream it adds to (resid_mid) carries the gradient unless the route takes the skip,
    // which then alone does (skip()).
    const Tensor mlp_cut = row_mask(mlp_stream, 2, true);
    hooks.add(nn::hook_name(nn::Point::resid_post, ul), [live, l, mlp_cut](const Tensor& v) {
      const Tensor& m = (*live)[2 * l + 1];
      return v + (m.detach() - m) * mlp_cut;
    });
  }
}

LocalReplacement::Impl::Pass LocalReplacement::Impl::run(const Mat& rows, bool probes, const Routes* routes,
                                                         bool qk, nn::Hooks<double>& hooks) const {
  const int64_t B = rows.rows();
  auto pass = std::make_shared<Pass>();
  pass->mlp_in.resize(L);
  pass->probe.resize(level_writes.size());
  const std::vector<Tensor> writes = writes_in_stream(rows);
  // Level lv's writes: (B, T, D), with the probe added when asked for.
  auto writes_at = [&](size_t lv) {
    if (!writes[lv].defined()) return Tensor::zeros({B, T, D});
    if (!probes) return writes[lv];
    pass->probe[lv] = Tensor::zeros({B, T, D}, true);
    return ag::add(writes[lv], pass->probe[lv]);
  };
  hooks.add(nn::hook_name(nn::Point::resid_pre, 0), [&](const Tensor&) { return writes_at(0); });
  for (const auto& [point, value] : frozen) {
    const Tensor repeated = repeat_rows(value, B);
    const bool pattern = point.size() > 8 && point.compare(point.size() - 8, 8, ".pattern") == 0;
    if (pattern && !qk)
      hooks.splice(point, [repeated](const Tensor&) { return repeated; });
    else
      hooks.add(point, [repeated](const Tensor&) { return repeated; });
  }
  if (routes) add_route_hooks(*routes, B, hooks, std::make_shared<std::vector<Tensor>>());
  for (int l = 0; l < L && has_mlp; ++l)
    hooks.splice(nn::hook_name(nn::Point::mlp_out, static_cast<size_t>(l)), [&, l](const Tensor& x) {
      pass->mlp_in[l] = x;
      Tensor out = ag::add(writes_at(static_cast<size_t>(l) + 1), b_dec[l]);
      if (W_skip[l].defined()) out = out + skip(l, x, routes);
      return out;
    });
  hooks.splice("logits", [pass](const Tensor& x) { return pass->final_in = x; });
  std::vector<int32_t> batch_ids;
  for (int64_t b = 0; b < B; ++b) batch_ids.insert(batch_ids.end(), ids.begin(), ids.end());
  model->forward(batch_ids, B, T, {}, &hooks);
  return *pass;
}

Vec LocalReplacement::Impl::target_values(const Pass& pass, int64_t b) const {
  const int64_t N = static_cast<int64_t>(nodes.size());
  Vec out = Vec::Zero(N);
  for (int64_t i = 0; i < n_features; ++i) {
    const GraphNode& n = nodes[i];
    const Eigen::Map<const Vec> x(pass.mlp_in[n.layer].data() + (b * T + n.position) * D, D);
    out[i] = x.dot(W_enc[n.layer].col(n.index)) + b_enc[n.layer][n.index];
  }
  const Eigen::Map<const Vec> xf(pass.final_in.data() + (b * T + T - 1) * D, D);
  for (int64_t k = 0; k < n_logits; ++k) out[N - n_logits + k] = xf.dot(unembed.row(k)) + unembed_bias[k];
  return out;
}

void LocalReplacement::Impl::backward_from(const Pass& pass, const std::vector<int64_t>& targets) const {
  const int64_t N = static_cast<int64_t>(nodes.size()), B = static_cast<int64_t>(targets.size());
  std::vector<Tensor> mlp_seed(static_cast<size_t>(L));
  for (int l = 0; l < L && has_mlp; ++l) mlp_seed[l] = Tensor::zeros({B, T, D});
  Tensor final_seed = Tensor::zeros({B, T, D});
  for (int64_t b = 0; b < B; ++b) {
    const GraphNode& n = nodes[targets[b]];
    if (targets[b] < n_features)
      Eigen::Map<Vec>(mlp_seed[n.layer].data() + (b * T + n.position) * D, D) = W_enc[n.layer].col(n.index);
    else
      Eigen::Map<Vec>(final_seed.data() + (b * T + T - 1) * D, D) =
          unembed.row(targets[b] - (N - n_logits)).transpose();
  }
  // sum(reads * seeds): its gradient is each row's target's.
  Tensor total = ag::sum(pass.final_in * final_seed);
  for (int l = 0; l < L && has_mlp; ++l) total = total + ag::sum(pass.mlp_in[l] * mlp_seed[l]);
  total.backward();
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
  for (int32_t id : ids)
    if (id < 0 || id >= model.shape.vocab) throw std::invalid_argument("graph: token id out of range");
  m.ids = ids;
  // The model in float64, its weights converted; the replacement is its own forward with hooks. Its
  // parameters never need a gradient here.
  m.model = nn::float64_copy(model);
  for (const auto& p : m.model->named_parameters()) p.tensor->set_requires_grad(false);
  const nn::ModelView<double> mv = nn::view(*m.model);
  m.learned_positions = mv.position_embedding.defined();
  nn::Hooks<double> hooks;
  const Tensor final_in = m.capture(hooks, model, mv);
  const std::vector<Mat> pre = m.add_feature_nodes(model, transcoders, hooks);
  m.add_error_and_input_nodes();
  m.add_logit_nodes(mv, targets, target_weights, model.shape.vocab);
  m.add_contributions(pre, final_in, hooks);
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
  const Impl& m = *impl_;
  if (multiplier.size() != size())
    throw std::invalid_argument("LocalReplacement::forward: expected " + std::to_string(size()) +
                                " multipliers");
  // The replacement is affine in its sources: without the constant terms, the value less the value of no
  // source at all.
  if (!biases) return forward(multiplier, true) - forward(Vec::Zero(size()), true);
  ag::NoGradScope no_grad;
  nn::Hooks<double> hooks;
  const Impl::Pass pass = m.run(multiplier.transpose(), false, nullptr, false, hooks);
  return m.target_values(pass, 0);
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
  if (m.final_normalises) {
    if (m.final_centres) rows.colwise() -= rows.rowwise().mean();
    rows *= m.final_scale;
    if (m.final_weight.size()) rows = rows * m.final_weight.asDiagonal();
  }
  return rows * m.vocab_unembed.transpose();
}

Eigen::MatrixXd LocalReplacement::adjacency() const {
  const Impl& m = *impl_;
  const int64_t N = size();
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(N, N);
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < m.n_features; ++i) targets.push_back(i);
  for (int64_t k = 0; k < m.n_logits; ++k) targets.push_back(N - m.n_logits + k);
  // A target's row is the gradient of its value with respect to every write's multiplier (the replacement
  // is affine in them, and the gradient stops at the sources: no feature's activation depends on the
  // stream). A batch of targets is one backward, row b seeded with target b.
  const size_t rows = batch_rows(m.T, m.D);
  for (size_t first = 0; first < targets.size(); first += rows) {
    const int64_t B = static_cast<int64_t>(std::min(rows, targets.size() - first));
    nn::Hooks<double> hooks;
    const Impl::Pass pass = m.run(Mat::Ones(B, N), true, nullptr, false, hooks);
    m.backward_from(pass, std::vector<int64_t>(targets.begin() + first, targets.begin() + first + B));
    m.for_each_write_gradient(
        pass, [&](int64_t b, int64_t w, double g) { A(targets[first + b], m.write_node[w]) += g; });
  }
  return A;
}

std::vector<PathTerm> LocalReplacement::edge_paths(int64_t target, int64_t source) const {
  return edge_paths(target, std::vector<int64_t>{source}).at(0);
}

std::vector<std::vector<PathTerm>> LocalReplacement::edge_paths(int64_t target,
                                                                const std::vector<int64_t>& sources) const {
  const Impl& m = *impl_;
  const int64_t N = size();
  if (target < 0 || target >= N || !(target < m.n_features || target >= N - m.n_logits))
    throw std::invalid_argument("edge_paths: node " + std::to_string(target) + " is not a target");
  const bool feature = target < m.n_features;
  // The target reads the stream entering its layer's MLP (after that layer's attention; the block's input
  // in a parallel block) or, for a logit, the last layer's output.
  const int top = feature ? m.nodes[target].layer : m.L;
  int bottom = top;
  for (int64_t s : sources) {
    if (s < 0 || s >= N || m.level[s] < 0)
      throw std::invalid_argument("edge_paths: node " + std::to_string(s) + " is not a source");
    bottom = std::min(bottom, m.level[s]);
  }
  std::vector<std::vector<PathTerm>> out(sources.size());
  // Each layer's stages from `bottom` up: (head, skip) pairs. A full layer: the stream or a head at the
  // attention stage, then the stream or (with a skip) the skip at the MLP stage; in a parallel block the
  // MLP reads the block's input, so a path takes the stream, one head or the skip. The target's own layer
  // (a feature's): only the attention stage, and none in a parallel block.
  std::vector<std::vector<std::pair<int, char>>> options(static_cast<size_t>(top + 1));
  for (int l = bottom; l <= top; ++l) {
    if (l == m.L) break;
    const bool own = l == top, with_skip = !own && m.has_mlp && m.W_skip[l].defined();
    options[l].push_back({-1, 0});
    if (!(own && m.parallel[l]))
      for (int h = 0; h < m.H; ++h) options[l].push_back({h, 0});
    if (with_skip) {
      options[l].push_back({-1, 1});
      if (!m.parallel[l])
        for (int h = 0; h < m.H; ++h) options[l].push_back({h, 1});
    }
  }
  // Every route (an odometer over the layers' options), a batch of them at a time.
  std::vector<std::vector<int>> routes;
  std::vector<int> digit(static_cast<size_t>(top + 1), 0);
  for (bool more = true; more;) {
    routes.push_back(digit);
    more = false;
    for (int l = bottom; l <= top && l < m.L; ++l) {
      if (++digit[l] < static_cast<int>(options[l].size())) {
        more = true;
        break;
      }
      digit[l] = 0;
    }
  }
  using Steps = std::vector<std::pair<int, int>>;
  std::vector<std::map<Steps, double>> found(sources.size());
  std::map<int64_t, size_t> source_index;
  for (size_t i = 0; i < sources.size(); ++i) source_index.emplace(sources[i], i);
  const size_t rows = batch_rows(m.T, m.D);
  for (size_t first = 0; first < routes.size(); first += rows) {
    const int64_t B = static_cast<int64_t>(std::min(rows, routes.size() - first));
    Routes r;
    r.head.assign(static_cast<size_t>(m.L), std::vector<int>(static_cast<size_t>(B), -1));
    r.skip.assign(static_cast<size_t>(m.L), std::vector<char>(static_cast<size_t>(B), 0));
    for (int64_t b = 0; b < B; ++b)
      for (int l = bottom; l <= top && l < m.L; ++l) {
        const auto [head, skip] = options[l][routes[first + b][l]];
        r.head[l][b] = head;
        r.skip[l][b] = skip;
      }
    nn::Hooks<double> hooks;
    const Impl::Pass pass = m.run(Mat::Ones(B, N), true, &r, false, hooks);
    m.backward_from(pass, std::vector<int64_t>(static_cast<size_t>(B), target));
    // A write at level lw takes its gradient from the routes that pass the stream at every layer below lw
    // (the layers below do not change it): each such route is one path from lw up.
    m.for_each_write_gradient(pass, [&](int64_t b, int64_t w, double g) {
      const int64_t node = m.write_node[w];
      const int lw = m.write_level[w];
      const auto it = source_index.find(node);
      if (it == source_index.end() || lw > top) return;
      const std::vector<int>& route = routes[first + b];
      for (int l = bottom; l < lw; ++l)
        if (route[l] != 0) return;
      Steps steps;
      if (lw != m.level[node]) steps.push_back({lw - 1, -2});
      for (int l = lw; l <= top && l < m.L; ++l) {
        const auto [head, skip] = options[l][route[l]];
        if (head >= 0) steps.push_back({l, head});
        if (skip) steps.push_back({l, -1});
      }
      found[it->second][steps] += g;
    });
  }
  for (size_t i = 0; i < sources.size(); ++i)
    for (const auto& [steps, weight] : found[i])
      if (weight != 0) out[i].push_back({steps, weight});  // steps from the source up
  return out;
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
  // One run: row i the source alone, row S no source (the constant terms: norm biases, attention biases,
  // b_dec); each row's q and k at the head, read where the model computes them.
  Mat rows = Mat::Zero(S + 1, N);
  for (int64_t i = 0; i < S; ++i) rows(i, a.sources[i]) = 1;
  nn::Hooks<double> hooks;
  const std::string q_point = nn::hook_name(nn::Point::attn_q, static_cast<size_t>(layer));
  const std::string k_point = nn::hook_name(nn::Point::attn_k, static_cast<size_t>(layer));
  hooks.capture(q_point);
  hooks.capture(k_point);
  {
    ag::NoGradScope no_grad;
    m.run(rows, false, nullptr, true, hooks);
  }
  const Tensor& qt = hooks.captured(q_point);  // (S + 1, T, H, dk)
  const Tensor& kt = hooks.captured(k_point);  // (S + 1, T, Hkv, dk)
  const int64_t Hkv = kt.size(2), kv = m.kv_head[layer][head];
  auto q_of = [&](int64_t r) {
    return Eigen::Map<const Vec>(qt.data() + ((r * m.T + query) * m.H + head) * m.dk, m.dk);
  };
  auto k_of = [&](int64_t r) {
    return Eigen::Map<const Vec>(kt.data() + ((r * m.T + key) * Hkv + kv) * m.dk, m.dk);
  };
  const Vec q0 = q_of(S), k0 = k_of(S);
  Mat q(S, m.dk), k(S, m.dk);
  for (int64_t i = 0; i < S; ++i) {
    q.row(i) = (q_of(i) - q0).transpose();
    k.row(i) = (k_of(i) - k0).transpose();
  }
  const double inv = 1 / std::sqrt(static_cast<double>(m.dk));
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

// The kept edges between kept nodes, each with its split by path (through heads, skips and MLPs): one
// edge_paths call per target.
void add_links(findings::AttributionGraph& g, const LocalReplacement& rm, const Eigen::MatrixXd& A,
               const GraphScores& s) {
  for (int64_t t = 0; t < A.rows(); ++t) {
    if (!s.node_kept[t]) continue;
    std::vector<int64_t> sources;
    for (int64_t c = 0; c < A.cols(); ++c)
      if (s.edge_kept(t, c) && s.node_kept[c] && A(t, c) != 0) sources.push_back(c);
    if (sources.empty()) continue;
    const std::vector<std::vector<PathTerm>> paths = rm.edge_paths(t, sources);
    for (size_t i = 0; i < sources.size(); ++i) {
      findings::GraphLink link{sources[i], t, A(t, sources[i]), {}};
      for (const PathTerm& term : paths[i]) {
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
