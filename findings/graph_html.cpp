// The graph viewer page (see graph_html.h).
#include "findings/graph_html.h"

#include "findings/report_assets.h"
#include "findings/svg_heatmap.h"
#include "io/append_format.h"

namespace findings {
namespace {

using nlohmann::json;

const char* kind_code(GraphNodeKind k) {
  switch (k) {
    case GraphNodeKind::feature:
      return "feature";
    case GraphNodeKind::error:
      return "error";
    case GraphNodeKind::embedding:
      return "embedding";
    case GraphNodeKind::position:
      return "position";
    case GraphNodeKind::logit:
      break;
  }
  return "logit";
}

// The page's data: every node ({id, kind, layer, pos, label, act, and a feature's logit effects, whether its
// feature page was read ("page") and its top examples as [tokens, peak, max] ("ex")}), every
// nonzero edge as three parallel arrays (src, tgt, w: full precision, so the page's pruning at the
// saved thresholds is the tool's), the split by path of the links kept at the saved thresholds, and the
// counts that delimit the node kinds.
json viewer_data(const AttributionGraph& g) {
  json nodes = json::array();
  for (const GraphNode& n : g.nodes) {
    json j = {{"id", graph_node_id(g, n)}, {"kind", kind_code(n.kind)},    {"layer", n.layer},
              {"pos", n.position},         {"label", graph_node_label(n)}, {"act", n.activation}};
    if (!n.top_logits.empty()) {
      j["up"] = json::array();
      j["down"] = json::array();
      for (const auto& [t, v] : n.top_logits) j["up"].push_back({t, v});
      for (const auto& [t, v] : n.bottom_logits) j["down"].push_back({t, v});
    }
    if (n.kind == GraphNodeKind::feature) {
      j["page"] = n.has_page;
      json ex = json::array();
      for (const GraphExample& e : n.examples) ex.push_back({e.tokens, e.peak, e.max});
      if (n.has_page) j["ex"] = std::move(ex);
    }
    nodes.push_back(std::move(j));
  }
  json src = json::array(), tgt = json::array(), w = json::array();
  for (const GraphEdge& e : g.edges) {
    src.push_back(e.source);
    tgt.push_back(e.target);
    w.push_back(e.weight);
  }
  json paths = json::array();
  for (const GraphLink& l : g.links) {
    json p = json::array();
    for (const auto& [name, weight] : l.paths) p.push_back({name, weight});
    paths.push_back({l.source, l.target, std::move(p)});
  }
  return {{"run", g.run},
          {"prompt", g.prompt_tokens},
          {"n_layers", g.n_layers},
          {"n_features", g.n_features},
          {"n_errors", g.n_errors},
          {"n_tokens", g.n_tokens},
          {"n_logits", g.n_logits},
          {"node_threshold", g.node_threshold},
          {"edge_threshold", g.edge_threshold},
          {"replacement_score", g.replacement_score},
          {"completeness_score", g.completeness_score},
          {"nodes", std::move(nodes)},
          {"src", std::move(src)},
          {"tgt", std::move(tgt)},
          {"w", std::move(w)},
          {"paths", std::move(paths)}};
}

}  // namespace

std::string graph_html(const AttributionGraph& g) {
  std::string prompt;
  for (const std::string& t : g.prompt_tokens) prompt += (prompt.empty() ? "" : " ") + t;
  const std::string title = (g.run.empty() ? std::string("attograd run") : g.run) + ": attribution graph";
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + xml_escape(title) + " \u2014 attograd</title>\n<style>\n" + std::string(report_css()) +
         std::string(graph_viewer_css()) + "</style>\n</head><body>\n<h1>" + xml_escape(title) + "</h1>\n";
  out += "<p class=\"summary\">prompt <code>" + xml_escape(prompt) + "</code>";
  io::append_format(out,
                    " &middot; %zu nodes and %lld edges unpruned &middot; replacement score %.4f &middot; "
                    "completeness score %.4f</p>\n",
                    g.nodes.size(), static_cast<long long>(g.unpruned_edges), g.replacement_score,
                    g.completeness_score);
  out +=
      "<div class=\"controls\" id=\"graph-controls\">"
      "<label for=\"node-threshold\">node threshold</label><input type=\"range\" id=\"node-threshold\" "
      "min=\"0\" max=\"1\" step=\"0.01\"><span id=\"node-threshold-value\" class=\"val\"></span>"
      "<label for=\"edge-threshold\">edge threshold</label><input type=\"range\" id=\"edge-threshold\" "
      "min=\"0\" max=\"1\" step=\"0.001\"><span id=\"edge-threshold-value\" class=\"val\"></span>"
      "<span id=\"kept-counts\"></span></div>\n"
      "<div class=\"graph-view\"><div id=\"graph\" aria-label=\"attribution graph\"></div>"
      "<aside id=\"node-info\" aria-live=\"polite\"></aside></div>\n"
      "<div class=\"legend\"><span><span class=\"sw\" style=\"background:#2166ac\"></span>positive "
      "edge</span><span><span class=\"sw\" style=\"background:#d6604d\"></span>negative edge</span>"
      "<span><span class=\"gk feature\"></span>feature</span><span><span class=\"gk error\"></span>error "
      "node</span><span><span class=\"gk embedding\"></span>token or position</span><span><span "
      "class=\"gk logit\"></span>target logit</span></div>\n"
      "<p class=\"note\">Rows are layers (embeddings at the bottom, then each MLP layer's transcoder "
      "features and error nodes, the target logits on top); columns are the prompt's positions. An edge "
      "is a direct effect in the local replacement model (attention patterns and norm scales frozen on "
      "the prompt), activation-weighted, on the target's pre-activation or demeaned logit; its width is "
      "its size. The sliders prune again from the full graph as <code>attograd graph</code> does (keep "
      "the nodes holding that fraction of the influence on the logits, then the edges likewise). Hover a "
      "node for its activation, influence (cumulative share), logit effects, top examples from the "
      "transcoder's feature page (the peak token boxed) and strongest edges with their split by attention "
      "head; click to pin it. docs/graphs.md defines every number.</p>\n";
  out += "<script type=\"application/json\" id=\"graph-data\">" +
         script_safe(viewer_data(g).dump(-1, ' ', false, json::error_handler_t::replace)) + "</script>\n";
  out += "<script>\n" + std::string(graph_viewer_js()) + "</script>\n</body></html>\n";
  return out;
}

}  // namespace findings
