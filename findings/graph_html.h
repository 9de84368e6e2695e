// RUN/graphs/NAME/graph.html: the attribution graph viewer, one self-contained page (inline CSS, JS and
// SVG; nothing fetched). It carries every node and every nonzero edge of the unpruned graph, so its
// sliders re-prune in the page with circuit-tracer's rule (attribution/graph.h's score_graph, ported to
// findings/graph_viewer.js): nodes by layer (rows: embeddings, each MLP layer's features and error nodes,
// the logits) and position (columns), edges coloured by sign and as wide as their weight; hovering a node
// shows its label, activation, influence, logit effects, a feature's top examples from its feature page
// (escaped; "no feature page" without one) and strongest kept edges with their split by head; a click
// pins it. The script and stylesheet are findings/graph_viewer.{js,css}, embedded at build time.
#pragma once

#include <string>

#include "findings/graph_view.h"

namespace findings {

std::string graph_html(const AttributionGraph& g);

}  // namespace findings
