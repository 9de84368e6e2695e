// The report's circuits, patching and lens sections (see report_circuits.h).
#include "findings/report_circuits.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "findings/svg_heatmap.h"
#include "io/append_format.h"

namespace findings {
namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "&ndash;";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A table cell shaded as the score table's are: `shade` in [0, 1] on the weights' scale, or in [-1, 1] on
// the diverging scale; white text on the dark end.
std::string shaded_cell(double v, double shade, bool diverging) {
  if (!std::isfinite(v)) return "<td class=\"num muted\">&ndash;</td>";
  const double s = std::clamp(shade, diverging ? -1.0 : 0.0, 1.0);
  const bool dark = diverging ? std::fabs(s) > 0.6 : s > 0.55;
  std::string out;
  io::append_format(out, "<td class=\"num\" style=\"background:%s;color:%s\">%s</td>",
                    (diverging ? diverging_colour(s) : sequential_colour(s)).c_str(), dark ? "#fff" : "#111",
                    num(v).c_str());
  return out;
}

// A sanitised id prefix from a name: letters, digits and '-' only.
std::string id_of(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

}  // namespace

std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& label) {
  std::string s = svg.substr(std::min(svg.size(), svg.find("<svg")));
  std::string out;
  out.reserve(s.size() + 256);
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "id=\"") == 0 && (i == 0 || s[i - 1] == ' ')) {
      out += "id=\"" + prefix + "-";
      i += 4;
    } else if (s.compare(i, 5, "url(#") == 0) {
      out += "url(#" + prefix + "-";
      i += 5;
    } else {
      out += s[i++];
    }
  }
  const size_t open = out.find("<svg");
  if (open != std::string::npos)
    out.insert(open + 4, " role=\"img\" aria-label=\"" + xml_escape(label) + "\"");
  return "<div class=\"wide\">" + out + "</div>";
}

std::string report_circuits_section(const std::optional<CircuitsResult>& circuits) {
  if (!circuits)
    return "<p class=\"muted\">No circuits.json in this run (attograd circuits RUN writes it).</p>\n";
  const CircuitsResult& r = *circuits;
  std::string out;
  io::append_format(
      out,
      "<p class=\"note\">Read from the weights at step %lld (docs/circuits.md). Copying: eigenvalues of "
      "W<sub>E</sub> OV W<sub>U</sub>, +1 for a head that copies the token it attends to. Positional "
      "prev-token: layer 0's attention on positions alone. DLA: mean direct logit attribution to the "
      "correct token on the held-out set. Copying and DLA are shaded blue to red around 0 (DLA up to the "
      "largest |DLA|), the positional score on the weights' scale.</p>\n",
      static_cast<long long>(r.step));
  double dla_top = 0;
  for (const HeadCircuit& h : r.heads)
    if (std::isfinite(h.dla)) dla_top = std::max(dla_top, std::fabs(h.dla));
  for (const ComponentDla& c : r.components)
    if (std::isfinite(c.dla)) dla_top = std::max(dla_top, std::fabs(c.dla));
  if (!(dla_top > 0)) dla_top = 1;
  out +=
      "<div class=\"wide\"><table class=\"scores\"><thead><tr><th>layer</th><th>head</th><th>copying</th>"
      "<th>positional prev-token</th><th>DLA</th></tr></thead><tbody>";
  for (const HeadCircuit& h : r.heads) {
    io::append_format(out, "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td>", h.layer, h.head);
    out += shaded_cell(h.copying, h.copying, true);
    out += h.prev_token_positional ? shaded_cell(*h.prev_token_positional, *h.prev_token_positional, false)
                                   : std::string("<td class=\"num muted\">&ndash;</td>");
    out += shaded_cell(h.dla, h.dla / dla_top, true) + "</tr>";
  }
  for (const ComponentDla& c : r.components)
    out += "<tr><td colspan=\"4\">" + xml_escape(c.name) + "</td>" +
           shaded_cell(c.dla, c.dla / dla_top, true) + "</tr>";
  out += "</tbody></table></div>\n";
  if (r.baseline) {
    io::append_format(
        out,
        "<p class=\"note\">Composition score ||M||<sub>F</sub> / (||X||<sub>F</sub> ||Y||<sub>F</sub>) of "
        "each earlier head into each later head; random baseline q %s, k %s, v %s. Hover a cell for its "
        "value.</p>\n",
        num(r.baseline->q).c_str(), num(r.baseline->k).c_str(), num(r.baseline->v).c_str());
    out += inline_svg(svg_composition(r, "composition scores"), "composition", "composition scores") + "\n";
  }
  if (!r.positional.empty())
    out += inline_svg(svg_positional(r, "layer 0: positional QK"), "positional", "positional QK maps") + "\n";
  return out;
}

std::string report_patching_section(const std::vector<PatchingResult>& patchings,
                                    const std::vector<std::string>& names) {
  if (patchings.empty()) return "";
  std::string out =
      "<p class=\"note\">Saved by attograd patch --save NAME: each clean activation patched alone into the "
      "corrupt run; recovered = (patched - corrupt) / (clean - corrupt) of the logit difference at the last "
      "position (red towards clean, blue away). Hover a cell for its value.</p>\n";
  for (size_t i = 0; i < patchings.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "patching " + std::to_string(i);
    out += "<h3>" + xml_escape(name) + "</h3>\n" +
           inline_svg(svg_patching(patchings[i], name), "patching-" + std::to_string(i) + "-" + id_of(name),
                      "activation patching " + name) +
           "\n";
  }
  return out;
}

std::string report_lens_section(const std::vector<LensResult>& lenses,
                                const std::vector<std::string>& names) {
  if (lenses.empty()) return "";
  std::string out =
      "<p class=\"note\">Saved by attograd lens --save NAME: the metric read off each layer's residual "
      "stream through ln_f (with the actual forward's scale) and the unembedding, and each component's "
      "direct "
      "contribution to it; the components sum to the model's metric at each position (red towards the "
      "answer, blue against it). Hover a cell for its value.</p>\n";
  for (size_t i = 0; i < lenses.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "lens " + std::to_string(i);
    out += "<h3>" + xml_escape(name) + "</h3>\n" +
           inline_svg(svg_lens(lenses[i], name), "lens-" + std::to_string(i) + "-" + id_of(name),
                      "logit lens " + name) +
           "\n";
  }
  return out;
}

}  // namespace findings
