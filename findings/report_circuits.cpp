// The report's circuits and patching sections (see report_circuits.h).
#include "findings/report_circuits.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "findings/svg_heatmap.h"
#include "io/append_format.h"

namespace findings {
namespace {

// An SVG as an <img>: inline SVGs share one id space in a page, and these pictures reuse gradient ids.
std::string svg_image(const std::string& svg, const std::string& alt) {
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  b64.reserve((svg.size() + 2) / 3 * 4);
  for (size_t i = 0; i < svg.size(); i += 3) {
    const uint32_t n = (static_cast<unsigned char>(svg[i]) << 16) |
                       (i + 1 < svg.size() ? static_cast<unsigned char>(svg[i + 1]) << 8 : 0) |
                       (i + 2 < svg.size() ? static_cast<unsigned char>(svg[i + 2]) : 0);
    b64 += kB64[(n >> 18) & 63];
    b64 += kB64[(n >> 12) & 63];
    b64 += i + 1 < svg.size() ? kB64[(n >> 6) & 63] : '=';
    b64 += i + 2 < svg.size() ? kB64[n & 63] : '=';
  }
  return "<img style=\"max-width:100%\" alt=\"" + xml_escape(alt) + "\" src=\"data:image/svg+xml;base64," +
         b64 + "\">";
}

std::string num(double v) {
  if (!std::isfinite(v)) return "&ndash;";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

std::string report_circuits_section(const std::optional<CircuitsResult>& circuits) {
  std::string out = "<h2>Circuits</h2>\n";
  if (!circuits)
    return out + "<p class=\"muted\">No circuits.json in this run (attograd circuits RUN writes it).</p>\n";
  const CircuitsResult& r = *circuits;
  io::append_format(
      out,
      "<p class=\"note\">Read from the weights at step %lld (docs/circuits.md). Copying: eigenvalues of "
      "W<sub>E</sub> OV W<sub>U</sub>, +1 for a head that copies the token it attends to. Positional "
      "prev-token: layer 0's attention on positions alone. DLA: mean direct logit attribution to the "
      "correct token on the held-out set.</p>\n",
      static_cast<long long>(r.step));
  out +=
      "<table class=\"scores\"><thead><tr><th>layer</th><th>head</th><th>copying</th><th>positional "
      "prev-token</th>"
      "<th>DLA</th></tr></thead><tbody>";
  for (const HeadCircuit& h : r.heads)
    io::append_format(out,
                      "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%s</td>"
                      "<td class=\"num\">%s</td><td class=\"num\">%s</td></tr>",
                      h.layer, h.head, num(h.copying).c_str(),
                      h.prev_token_positional ? num(*h.prev_token_positional).c_str() : "&ndash;",
                      num(h.dla).c_str());
  for (const ComponentDla& c : r.components)
    io::append_format(out, "<tr><td colspan=\"4\">%s</td><td class=\"num\">%s</td></tr>",
                      xml_escape(c.name).c_str(), num(c.dla).c_str());
  out += "</tbody></table>\n";
  if (r.baseline) {
    io::append_format(
        out,
        "<p class=\"note\">Composition score ||M||<sub>F</sub> / (||X||<sub>F</sub> ||Y||<sub>F</sub>) of "
        "each earlier head into each later head; random baseline q %s, k %s, v %s.</p>\n",
        num(r.baseline->q).c_str(), num(r.baseline->k).c_str(), num(r.baseline->v).c_str());
    out += "<div class=\"row\">" + svg_image(svg_composition(r, "composition scores"), "composition scores") +
           "</div>\n";
  }
  if (!r.positional.empty())
    out += "<div class=\"row\">" +
           svg_image(svg_positional(r, "layer 0: positional QK"), "positional QK maps") + "</div>\n";
  return out;
}

std::string report_patching_section(const std::vector<PatchingResult>& patchings,
                                    const std::vector<std::string>& names) {
  if (patchings.empty()) return "";
  std::string out =
      "<h2>Activation patching</h2>\n<p class=\"note\">Saved by attograd patch --save NAME: each clean "
      "activation "
      "patched alone into the corrupt run; recovered = (patched - corrupt) / (clean - corrupt) of the logit "
      "difference at the last position (red towards clean, blue away).</p>\n";
  for (size_t i = 0; i < patchings.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "patching " + std::to_string(i);
    out += "<h3>" + xml_escape(name) + "</h3>\n<div class=\"row\">" +
           svg_image(svg_patching(patchings[i], name), name) + "</div>\n";
  }
  return out;
}

std::string report_lens_section(const std::vector<LensResult>& lenses,
                                const std::vector<std::string>& names) {
  if (lenses.empty()) return "";
  std::string out =
      "<h2>Logit lens and residual decomposition</h2>\n<p class=\"note\">Saved by attograd lens --save NAME: "
      "the metric read off each layer's residual stream through ln_f (with the actual forward's scale) and "
      "the unembedding, and each component's direct contribution to it; the components sum to the model's "
      "metric at each position (red towards the answer, blue against it).</p>\n";
  for (size_t i = 0; i < lenses.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "lens " + std::to_string(i);
    out += "<h3>" + xml_escape(name) + "</h3>\n<div class=\"row\">" +
           svg_image(svg_lens(lenses[i], name), name) + "</div>\n";
  }
  return out;
}

}  // namespace findings
