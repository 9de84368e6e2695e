// `attograd graph` as a library call: the attribution graph of one prompt (Ameisen et al. 2025, "Circuit
// tracing"; circuit-tracer's definitions), exact, in float64. The local replacement model is the model's
// own float64 forward (nn::CausalLM<double>) with hooks, as circuit-tracer builds it on its host model: the
// prompt's attention patterns and norm scales frozen, each MLP spliced out for its transcoder's active
// features plus one error node per layer and position (the MLP's output minus the transcoder's), and the
// unembedding read before any softcap. So it reproduces the model on the prompt and is affine in its source
// nodes, whatever the blocks are (parallel, windowed, grouped-query, gated). A source node's contribution is
// a vector written into the residual stream: a feature's activation times its decoder row, an error node's
// error, a token's embedding, a position's embedding. The adjacency matrix A (targets x sources) holds each
// source's direct effect on each target (a feature's pre-activation, or a demeaned target logit) along
// paths through frozen attention, frozen norms, the residual stream and the transcoders' skips, not through
// other nodes: the gradient of the target with respect to the source's multiplier, a batch of targets per
// backward. Each target's value is sum over sources of A[target, source] plus its bias (its value with
// every source at zero). Pruning, influence, and the replacement and completeness scores are
// circuit-tracer's. docs/graphs.md gives every definition.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analysis/tool.h"
#include "dictionary/sae.h"
#include "findings/graph_view.h"
#include "nn/transformer.h"

namespace attribution {

struct GraphRequest {
  analysis::Sequence input;  // the prompt
  analysis::Token target;    // the one target logit; empty = the top logits (cumulative p 0.95, at most 10)
  std::string transcoders;   // the transcoders' folder; "" = RUN/transcoders (a model with MLPs); its
                             // DIR/L/features.json, when there, gives the feature nodes their top examples
  double node_threshold = 0.8;   // keep the nodes holding this fraction of the influence
  double edge_threshold = 0.98;  // keep the edges holding this fraction of the influence
  // "" = write nothing; NAME = RUN/graphs/NAME/graph.json, adjacency.npy and graph.html. Both front ends
  // write "graph" unless told otherwise.
  std::string save = "graph";
  std::string qk;  // "L.H.K": also head H of layer L's QK attribution from the last position to K
};

analysis::Output<findings::AttributionGraph> graph(analysis::StudyRun& run, const GraphRequest& request);

// One layer's transcoder with how it activates (its config's activation and k); W_enc undefined for a
// layer without an MLP. A cross-layer transcoder's layer (params.writes > 1) writes to the MLP outputs of
// its layer and the next writes - 1: its features are sources at each, with edges into every later node.
struct LayerTranscoder {
  dictionary::SaeParams<float> params;
  dictionary::SaeActivation activation = dictionary::SaeActivation::relu;
  int k = 0;
};

// One path's part of an edge: the attention heads (layer, head) and transcoder skips (layer, -1) it
// passes through, from the source up, and its share of the edge's weight; a cross-layer feature's path
// starts with (layer, -2) when it is written into a later layer's MLP output than its own.
struct PathTerm {
  std::vector<std::pair<int, int>> steps;
  double weight = 0;
};

// A head's attention score from `query` to `key` on the prompt, split by what makes it: the bilinear term
// of every pair of source nodes (query side, key side) through W_Q W_K^T / sqrt(dk), and the rest (the terms
// with the biases: norm biases, attention biases, b_dec). terms.sum() + rest is the score.
struct QkAttribution {
  std::vector<int64_t> sources;  // the source nodes that reach the head's input
  Eigen::MatrixXd terms;         // (sources, sources): query-side source x key-side source
  double rest = 0;
  double score = 0;  // the model's score (blocks.L.attn.scores), float64
};

// The local replacement model of `model` on `ids`, in float64, with `transcoders` (one per layer) and the
// target logits `targets` (token ids at the last position, with their weights). It holds the model
// converted to float64 and runs its forward, with hooks, for every method below.
class LocalReplacement {
 public:
  LocalReplacement(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids,
                   const std::vector<LayerTranscoder>& transcoders, const std::vector<int32_t>& targets,
                   const std::vector<double>& target_weights);
  ~LocalReplacement();

  // Nodes in circuit-tracer's order: features, errors (layer-major), embeddings, positions, logits.
  const std::vector<findings::GraphNode>& nodes() const;
  int64_t n_features() const;
  int64_t n_errors() const;
  int64_t n_tokens() const;
  int64_t n_logits() const;
  int64_t size() const { return static_cast<int64_t>(nodes().size()); }

  // The direct-effect matrix (size x size, targets x sources): each target's row is the gradient of its
  // value with respect to the sources' multipliers; rows of embeddings, positions and errors are zero.
  Eigen::MatrixXd adjacency() const;
  // The frozen affine model run forward with each source's contribution times multiplier[source] (1 for
  // every node: the prompt as the model saw it) and the constant terms (biases, b_dec) when `biases`:
  // each node's value (features: pre-activation; logits: the demeaned logit before any softcap; sources: 0).
  // Without biases it is the value less that of no source at all (the model is affine in them).
  Eigen::VectorXd forward(const Eigen::VectorXd& multiplier, bool biases = true) const;
  // Each node's value on the prompt from the float64 model itself (features' pre-activations from the
  // MLP's input, the logits demeaned, before any softcap): what forward(ones) reproduces.
  const Eigen::VectorXd& model_values() const;
  // The target weights (logit probabilities), zero except on the logits.
  Eigen::VectorXd logit_weights() const;
  // The edge A(target, source) split by path: the residual stream alone (no step), through each head, each
  // skip, and each sequence of them; the terms sum to the edge. Zero terms are left out.
  std::vector<PathTerm> edge_paths(int64_t target, int64_t source) const;
  // The same for several sources of one target, from one batched run per route batch.
  std::vector<std::vector<PathTerm>> edge_paths(int64_t target, const std::vector<int64_t>& sources) const;
  // The QK attribution of head `head` of `layer` from `query` to `key`.
  QkAttribution qk_attribution(int layer, int head, int query, int key) const;
  // Each feature's logit effects (n_features x vocab): one unit of its decoder row read straight through
  // the final norm frozen at the last position and the demeaned unembedding (no attention, no later
  // layer), as a feature page's "top logits" read the decoder through W_U.
  Eigen::MatrixXd feature_logit_effects() const;

 private:
  struct Routes;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// circuit-tracer's scores on an adjacency matrix with the node layout above.
struct GraphScores {
  Eigen::VectorXd influence;   // each node's influence on the weighted logits (row-normalised |A|)
  Eigen::VectorXd cumulative;  // each node's cumulative influence fraction, sorted descending
  std::vector<char> node_kept;
  Eigen::Matrix<char, Eigen::Dynamic, Eigen::Dynamic> edge_kept;
  double replacement = 0, completeness = 0;
};
GraphScores score_graph(const Eigen::MatrixXd& A, const Eigen::VectorXd& logit_weights, int64_t n_features,
                        int64_t n_errors, int64_t n_tokens, int64_t n_logits, double node_threshold,
                        double edge_threshold);

// A float64 matrix as a .npy file (version 1.0, '<f8', C order).
std::string npy_bytes(const Eigen::MatrixXd& m);

}  // namespace attribution
