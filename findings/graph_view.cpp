#include "findings/graph_view.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "io/append_format.h"

namespace findings {

using nlohmann::json;

namespace {

// A node's id and its Neuronpedia fields: features "L_F_P" (F the feature), errors "err_L_P"
// (circuit-tracer's "0_L_P" would collide with layer 0's features), embeddings "E_V_P", positional embeddings
// "P_P", logits "L+1_V_P".
json node_json(const AttributionGraph& g, const GraphNode& n) {
  const std::string pos = std::to_string(n.position);
  json j;
  switch (n.kind) {
    case GraphNodeKind::feature: {
      const int64_t cantor = (n.layer + n.index) * (n.layer + n.index + 1) / 2 + n.index;
      j = {{"node_id", std::to_string(n.layer) + "_" + std::to_string(n.index) + "_" + pos},
           {"feature", cantor},
           {"layer", std::to_string(n.layer)},
           {"feature_type", "cross layer transcoder"},
           {"jsNodeId", std::to_string(n.layer) + "_" + std::to_string(n.index) + "-0"},
           {"clerp", "layer " + std::to_string(n.layer) + " feature " + std::to_string(n.index)}};
      break;
    }
    case GraphNodeKind::error:
      j = {{"node_id", "err_" + std::to_string(n.layer) + "_" + pos},
           {"feature", -1},
           {"layer", std::to_string(n.layer)},
           {"feature_type", "mlp reconstruction error"},
           {"jsNodeId", "err_" + std::to_string(n.layer) + "_" + pos + "-0"},
           {"clerp", "MLP " + std::to_string(n.layer) + " error at " + pos}};
      break;
    case GraphNodeKind::embedding:
      j = {{"node_id", "E_" + std::to_string(n.index) + "_" + pos},
           {"feature", n.position},
           {"layer", "E"},
           {"feature_type", "embedding"},
           {"jsNodeId", "E_" + std::to_string(n.index) + "-" + pos},
           {"clerp", "token \"" + n.token + "\""}};
      break;
    case GraphNodeKind::position:
      j = {{"node_id", "P_" + pos},       {"feature", n.position},  {"layer", "E"},
           {"feature_type", "embedding"}, {"jsNodeId", "P-" + pos}, {"clerp", "position " + pos}};
      break;
    case GraphNodeKind::logit: {
      const std::string layer = std::to_string(g.n_layers + 1);
      char clerp[160];
      std::snprintf(clerp, sizeof clerp, "Output \"%s\" (p=%.3f)", n.token.c_str(), n.activation);
      j = {{"node_id", layer + "_" + std::to_string(n.index) + "_" + pos},
           {"feature", n.index},
           {"layer", layer},
           {"feature_type", "logit"},
           {"token_prob", n.activation},
           {"is_target_logit", &n == &g.nodes[g.nodes.size() - g.n_logits]},
           {"jsNodeId", "L_" + std::to_string(n.index) + "-" + pos},
           {"clerp", clerp}};
      break;
    }
  }
  j["ctx_idx"] = n.position;
  j["run_idx"] = 0;
  j["reverse_ctx_idx"] = 0;
  j["influence"] = n.influence;
  if (n.kind == GraphNodeKind::feature) {
    j["activation"] = n.activation;
    // attograd's extra fields (Neuronpedia ignores them): the logit effects and, when the feature page was
    // read, the top examples.
    auto pairs = [](const std::vector<std::pair<std::string, double>>& v) {
      json a = json::array();
      for (const auto& [tok, val] : v) a.push_back({{"token", tok}, {"logit", val}});
      return a;
    };
    j["logit_effects"] = {{"promoted", pairs(n.top_logits)}, {"suppressed", pairs(n.bottom_logits)}};
    if (n.has_page) {
      json ex = json::array();
      for (const GraphExample& e : n.examples)
        ex.push_back({{"tokens", e.tokens}, {"peak", e.peak}, {"max", e.max}});
      j["examples"] = std::move(ex);
    }
  }
  if (n.kind != GraphNodeKind::logit) {
    j["token_prob"] = 0.0;
    j["is_target_logit"] = false;
  }
  return j;
}

}  // namespace

std::string graph_node_id(const AttributionGraph& g, const GraphNode& n) {
  return node_json(g, n)["node_id"];
}

std::string graph_node_label(const GraphNode& n) {
  switch (n.kind) {
    case GraphNodeKind::feature:
      return "L" + std::to_string(n.layer) + " f" + std::to_string(n.index) + " @" +
             std::to_string(n.position);
    case GraphNodeKind::error:
      return "L" + std::to_string(n.layer) + " error @" + std::to_string(n.position);
    case GraphNodeKind::embedding:
      return "emb '" + n.token + "' @" + std::to_string(n.position);
    case GraphNodeKind::position:
      return "pos @" + std::to_string(n.position);
    case GraphNodeKind::logit:
      break;
  }
  return "logit '" + n.token + "'";
}

json graph_to_json(const AttributionGraph& g) {
  std::string prompt;
  for (const std::string& t : g.prompt_tokens) prompt += (prompt.empty() ? "" : " ") + t;
  json nodes = json::array(), links = json::array();
  std::vector<std::string> ids(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].kept) continue;
    json n = node_json(g, g.nodes[i]);
    ids[i] = n["node_id"];
    nodes.push_back(std::move(n));
  }
  for (const GraphLink& l : g.links) {
    json paths = json::array();
    for (const auto& [path, weight] : l.paths) paths.push_back({{"path", path}, {"weight", weight}});
    links.push_back(
        {{"source", ids[l.source]}, {"target", ids[l.target]}, {"weight", l.weight}, {"paths", paths}});
  }
  json meta = {{"slug", g.slug},
               {"scan", g.run},
               {"transcoder_list", g.transcoders},
               {"prompt_tokens", g.prompt_tokens},
               {"prompt", prompt},
               {"node_threshold", g.node_threshold},
               {"schema_version", 1},
               {"edge_threshold", g.edge_threshold},
               {"replacement_score", g.replacement_score},
               {"completeness_score", g.completeness_score},
               {"n_features", g.n_features},
               {"n_errors", g.n_errors},
               {"n_tokens", g.n_tokens},
               {"n_logits", g.n_logits},
               {"unpruned_nodes", g.nodes.size()},
               {"unpruned_edges", g.unpruned_edges}};
  json q = {{"pinnedIds", json::array()},
            {"supernodes", json::array()},
            {"linkType", "both"},
            {"clickedId", ""},
            {"sg_pos", ""}};
  json out = {{"metadata", meta}, {"qParams", q}, {"nodes", nodes}, {"links", links}};
  for (const GraphQk& a : g.qk) {
    json terms = json::array();
    for (const auto& [qn, kn, v] : a.top)
      terms.push_back({{"query_node", graph_node_id(g, g.nodes[qn])},
                       {"key_node", graph_node_id(g, g.nodes[kn])},
                       {"value", v}});
    out["qk"] = {{"layer", a.layer}, {"head", a.head},   {"query", a.query},
                 {"key", a.key},     {"score", a.score}, {"terms_total", a.terms_total},
                 {"rest", a.rest},   {"top", terms}};
  }
  return out;
}

GraphSummary graph_summary_from_json(const json& j, const std::string& name, const std::string& where) {
  GraphSummary s;
  s.name = name;
  try {
    const json& m = j.at("metadata");
    s.prompt = m.at("prompt").get<std::string>();
    s.replacement_score = m.at("replacement_score").get<double>();
    s.completeness_score = m.at("completeness_score").get<double>();
    s.nodes = static_cast<int64_t>(j.at("nodes").size());
    s.links = static_cast<int64_t>(j.at("links").size());
  } catch (const json::exception& e) {
    throw std::runtime_error(where +
                             ": expected graph.json's metadata (prompt, replacement_score, "
                             "completeness_score), nodes and links: " +
                             e.what());
  }
  return s;
}

std::string graph_table(const AttributionGraph& g) {
  std::string out;
  int64_t kept = 0;
  for (const GraphNode& n : g.nodes) kept += n.kept;
  io::append_format(
      out, "%lld nodes (%lld features, %lld error nodes, %lld embeddings, %lld logits), %lld edges\n",
      static_cast<long long>(g.nodes.size()), static_cast<long long>(g.n_features),
      static_cast<long long>(g.n_errors), static_cast<long long>(2 * g.n_tokens),
      static_cast<long long>(g.n_logits), static_cast<long long>(g.unpruned_edges));
  io::append_format(out, "pruned (node %.2f, edge %.2f): %lld nodes, %lld edges\n", g.node_threshold,
                    g.edge_threshold, static_cast<long long>(kept), static_cast<long long>(g.links.size()));
  io::append_format(out, "replacement score %.4f  completeness score %.4f\n", g.replacement_score,
                    g.completeness_score);
  // The strongest links into the logits, then the strongest others.
  std::vector<GraphLink> links = g.links;
  std::sort(links.begin(), links.end(),
            [](const GraphLink& a, const GraphLink& b) { return std::abs(a.weight) > std::abs(b.weight); });
  auto name = [&](int64_t i) { return graph_node_label(g.nodes[i]); };
  for (const GraphQk& a : g.qk) {
    io::append_format(out,
                      "QK of L%d.H%d from position %d to %d: score %.6g = source pairs %.6g + rest %.6g\n",
                      a.layer, a.head, a.query, a.key, a.score, a.terms_total, a.rest);
    for (const auto& [qn, kn, v] : a.top)
      io::append_format(out, "  query %-24s key %-24s %+.4f\n", name(qn).c_str(), name(kn).c_str(), v);
  }
  const size_t shown = std::min<size_t>(links.size(), 12);
  if (shown > 0) out += "strongest edges:\n";
  for (size_t i = 0; i < shown; ++i)
    io::append_format(out, "  %-24s -> %-24s %+.4f\n", name(links[i].source).c_str(),
                      name(links[i].target).c_str(), links[i].weight);
  return out;
}

}  // namespace findings
