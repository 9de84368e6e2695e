// Self-contained SVG pictures of attention maps (RUN/attention/step-NNNNNN.svg and `attend/compare --svg`):
// a grid of heatmaps with rows = layers and columns = heads, read as CircuitsVis does: destination (query)
// tokens down the left, source (key) tokens across the top as "(idx) token", the masked future triangle
// hatched so it is not mistaken for weight 0, one colour scale for every panel with a legend bar.
// No external references: no fonts, images or scripts are fetched. Not for terminals (ascii_heatmap) and
// not for the run report's interactivity (report_html, which shares these colour scales).
#pragma once

#include <string>
#include <vector>

#include "findings/attention_maps.h"

namespace findings {

struct SvgOptions {
  std::string title;        // drawn above the grid when not empty
  bool mark_future = true;  // hatch j > i (causal models); false for maps made without a mask
  int cell = 0;             // cell side in px; 0 picks one from T (18 px for short sequences)
};

// Rows = layers, columns = heads, each panel titled "layer l head h"; weights coloured on the fixed
// scale 0..1 (white to dark blue) so panels compare by colour. Throws std::invalid_argument when a map is
// not T x T for the probe's T tokens.
std::string svg_attention_grid(const Probe& probe, const SvgOptions& opts = {});

// Two inputs of the same length through one model: per (layer, head) a row of three panels, A, B and
// A - B. A and B share the 0..1 scale; A - B uses a diverging scale (blue: B looks more, red: A looks
// more) symmetric about 0 up to the largest |A - B| rounded up to a tenth. Throws std::invalid_argument
// when the probes differ in length or in their (layer, head) set.
std::string svg_compare(const Probe& a, const Probe& b, const SvgOptions& opts = {});

// The colour scales, as "#rrggbb": weight in [0, 1] from white to dark blue, and a difference in [-1, 1]
// from blue through white to red. Inputs outside are clamped. report_html uses the same functions.
std::string sequential_colour(double w);
std::string diverging_colour(double d);

// Escapes & < > " ' for XML text and attribute values.
std::string xml_escape(const std::string& s);
// JSON text made safe inside <script>: '<' only occurs inside JSON strings, where \u003c means the same,
// so no token name can close the tag ("</script>") or open a comment.
std::string script_safe(const std::string& json_text);
// A relative path as a URL path: every byte other than letters, digits, '-', '.', '_', '~' and '/'
// percent-encoded, so a folder name can never end the link early or read as a query.
std::string url_path(const std::string& path);

}  // namespace findings
