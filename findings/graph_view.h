// An attribution graph as plain data (study/graph.h computes it): its nodes in circuit-tracer's order
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

struct GraphNode {
  GraphNodeKind kind = GraphNodeKind::feature;
  int layer = 0;          // features and errors: the MLP's layer; embeddings -1; logits n_layers
  int position = 0;       // the token position (ctx_idx); logits: the last position
  int64_t index = 0;      // features: the feature; embeddings and logits: the token id; else -1
  std::string token;      // embeddings and logits: the token's name
  double activation = 0;  // features: the activation; logits: the probability (the logit weight)
  double influence = 0;   // cumulative influence score (circuit-tracer's), 0..1
  bool kept = false;      // survives pruning
};

struct GraphLink {
  int64_t source = 0, target = 0;  // node indices
  double weight = 0;               // the direct effect (activation-weighted)
  // The weight split by the path it takes ("resid": the residual stream alone; "L0.H1>L1.H2": through
  // head 1 of layer 0, then head 2 of layer 1; "L0.skip": a transcoder's skip); the parts sum to weight.
  std::vector<std::pair<std::string, double>> paths;
};

// A head's QK attribution (study/graph.h's qk_attribution): its score from `query` to `key`, the largest
// source-pair terms (query-side node, key-side node, value) and the rest; every term sums to the score.
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
  int64_t n_features = 0, n_errors = 0, n_tokens = 0, n_logits = 0, unpruned_edges = 0;
  double node_threshold = 0.8, edge_threshold = 0.98;
  double replacement_score = 0, completeness_score = 0;
  std::vector<std::string> transcoders;  // the files read, one per MLP layer
  std::vector<GraphQk> qk;               // the QK attributions asked for (at most one)
};

// graph.json: Neuronpedia's schema (metadata {slug, scan, transcoder_list, prompt_tokens, prompt,
// node_threshold, schema_version, and attograd's scores}, qParams, the kept nodes, the links).
nlohmann::json graph_to_json(const AttributionGraph& g);
std::string graph_table(const AttributionGraph& g);

}  // namespace findings
