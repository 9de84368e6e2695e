// An attribution graph as plain data (attribution/graph.h computes it): its nodes in circuit-tracer's order
// (active transcoder features, one error node per MLP layer and position, the token embeddings, the
// positional embeddings, the target logits), the links that survive pruning, the pruning thresholds and
// the replacement and completeness scores; its JSON in Neuronpedia's graph schema (graph.json: metadata,
// qParams, nodes, links) and its terminal table. docs/graphs.md defines every field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace findings {

enum class GraphNodeKind { feature, error, embedding, position, logit };

// One top-activating example of a feature from its transcoder's feature page (DIR/L/features.json): a
// window of the sequence's token names around the peak, the peak's index in the window, its activation.
struct GraphExample {
  std::vector<std::string> tokens;
  int peak = 0;
  double max = 0;
};

struct GraphNode {
  GraphNodeKind kind = GraphNodeKind::feature;
  int layer = 0;          // features and errors: the MLP's layer; embeddings -1; logits n_layers
  int position = 0;       // the token position (ctx_idx); logits: the last position
  int64_t index = 0;      // features: the feature; embeddings and logits: the token id; else -1
  std::string token;      // embeddings and logits: the token's name
  double activation = 0;  // features: the activation; logits: the probability (the logit weight)
  double influence = 0;   // cumulative influence score (circuit-tracer's), 0..1
  bool kept = false;      // survives pruning
  // Features: the tokens whose demeaned logits one unit of the feature raises most and lowers most, read
  // straight through the frozen final norm and the unembedding (largest first, then most negative first).
  std::vector<std::pair<std::string, double>> top_logits, bottom_logits;
  // Features: whether the layer's feature page (DIR/L/features.json) was read, and the feature's strongest
  // examples on it (at most attribution/graph.cpp's kGraphExamples, strongest first).
  bool has_page = false;
  std::vector<GraphExample> examples;
};

// One nonzero entry of the unpruned direct-effect matrix.
struct GraphEdge {
  int32_t source = 0, target = 0;  // node indices
  double weight = 0;
};

struct GraphLink {
  int64_t source = 0, target = 0;  // node indices
  double weight = 0;               // the direct effect (activation-weighted)
  // The weight split by the path it takes ("resid": the residual stream alone; "L0.H1>L1.H2": through
  // head 1 of layer 0, then head 2 of layer 1; "L0.skip": a transcoder's skip); the parts sum to weight.
  std::vector<std::pair<std::string, double>> paths;
};

// A head's QK attribution (attribution/graph.h's qk_attribution): its score from `query` to `key`, the
// largest source-pair terms (query-side node, key-side node, value) and the rest; every term sums to the
// score.
struct GraphQk {
  int layer = 0, head = 0, query = 0, key = 0;
  double score = 0, rest = 0, terms_total = 0;  // terms_total: the sum of every pair's term
  std::vector<std::tuple<int64_t, int64_t, double>> top;
};

struct AttributionGraph {
  std::string run, slug;
  std::vector<std::string> prompt_tokens;
  int n_layers = 0;
  std::vector<GraphNode> nodes;  // every node of the unpruned graph
  std::vector<GraphLink> links;  // the edges that survive pruning, between kept nodes
  std::vector<GraphEdge> edges;  // every nonzero edge of the unpruned graph (the viewer re-prunes them)
  int64_t n_features = 0, n_errors = 0, n_tokens = 0, n_logits = 0, unpruned_edges = 0;
  double node_threshold = 0.8, edge_threshold = 0.98;
  double replacement_score = 0, completeness_score = 0;
  std::vector<std::string> transcoders;  // the files read, one per MLP layer
  std::vector<GraphQk> qk;               // the QK attributions asked for (at most one)
};

// What the run's report lists of a saved graph: its folder's name, prompt, kept sizes and scores (from
// its graph.json) and its viewer page's path relative to the run folder ("" when missing).
struct GraphSummary {
  std::string name, prompt, page;
  int64_t nodes = 0, links = 0;
  double replacement_score = 0, completeness_score = 0;
};
// A GraphSummary from graph.json's object (`where` names the file in errors).
GraphSummary graph_summary_from_json(const nlohmann::json& j, const std::string& name,
                                     const std::string& where);

// graph.json: Neuronpedia's schema (metadata {slug, scan, transcoder_list, prompt_tokens, prompt,
// node_threshold, schema_version, and attograd's scores}, qParams, the kept nodes, the links).
nlohmann::json graph_to_json(const AttributionGraph& g);
// A node's id in graph.json ("L_F_P", "err_L_P", "E_V_P", "P_P", "{n_layers+1}_V_P") and its short label
// for tables and the viewer ("L1 f12 @3", "emb '5' @2", "logit '9'").
std::string graph_node_id(const AttributionGraph& g, const GraphNode& n);
std::string graph_node_label(const GraphNode& n);
std::string graph_table(const AttributionGraph& g);

}  // namespace findings
