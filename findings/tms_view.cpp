#include "findings/tms_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "findings/svg_heatmap.h"
#include "io/append_format.h"

namespace findings {

nlohmann::json tms_panel_to_json(const TmsPanel& p) {
  nlohmann::json W = nlohmann::json::array();
  for (int k = 0; k < p.m; ++k)
    W.push_back(std::vector<float>(p.W.begin() + k * p.n, p.W.begin() + (k + 1) * p.n));
  return nlohmann::json{{"W", W}, {"b", p.b}, {"loss", p.loss}};
}

std::string tms_table(const TmsReport& r) {
  std::string out;
  io::append_format(out, "n %d, m %d, importance %g^i: feature norms ||W_i|| (superposition)\n", r.n, r.m,
                    r.importance);
  for (const TmsPanel& p : r.panels) {
    int stored = 0;
    io::append_format(out, "S %-6g loss %.5f |", p.sparsity, p.loss);
    for (int i = 0; i < p.n; ++i) {
      stored += p.norms[i] > 0.5;
      io::append_format(out, " %.2f(%.2f)", p.norms[i], p.superposition[i]);
    }
    io::append_format(out, " | stored %d\n", stored);
  }
  return out;
}

std::string tms_title(const TmsReport& r) {
  std::string out;
  io::append_format(out, "Toy model of superposition: n %d features in m %d dims, importance %g^i", r.n, r.m,
                    r.importance);
  return out;
}

namespace {

// Dark blue (0) to yellow (1), the paper's colouring of superposition.
std::string superposition_colour(double s) {
  const double t = std::clamp(s, 0.0, 1.0);
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(20 + t * 233),
                static_cast<int>(30 + t * 200), static_cast<int>(90 - t * 60));
  return buf;
}

}  // namespace

std::string svg_tms(const std::string& title, const std::vector<TmsPanel>& panels) {
  const int pw = 200, plane = panels.empty() || panels[0].m != 2 ? 0 : 180;
  int bars_h = 0;
  for (const TmsPanel& p : panels) bars_h = std::max(bars_h, 14 * p.n + 20);
  const int width = std::max(1, static_cast<int>(panels.size())) * pw + 20;
  const int height = 50 + plane + bars_h + 30;
  char buf[256];
  std::string s;
  std::snprintf(
      buf, sizeof buf,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      width, height);
  s += buf;
  s += "<text x=\"10\" y=\"18\" font-size=\"14\">" + xml_escape(title) + "</text>\n";
  for (size_t k = 0; k < panels.size(); ++k) {
    const TmsPanel& p = panels[k];
    const int x0 = 10 + static_cast<int>(k) * pw;
    std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"40\">sparsity %g</text>\n", x0, p.sparsity);
    s += buf;
    if (plane > 0) {
      // W's columns in the plane, scaled so that norm 1.5 reaches the edge.
      const double cx = x0 + 85, cy = 45 + plane / 2.0, r = 80 / 1.5;
      std::snprintf(buf, sizeof buf,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"#ddd\"/>\n", cx, cy,
                    r);
      s += buf;
      for (int i = 0; i < p.n; ++i) {
        const double wx = p.W[i], wy = p.W[p.n + i];
        std::snprintf(
            buf, sizeof buf,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>"
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>feature %d</title></circle>\n",
            cx, cy, cx + r * wx, cy - r * wy, superposition_colour(p.superposition[i]).c_str(), cx + r * wx,
            cy - r * wy, superposition_colour(p.superposition[i]).c_str(), i);
        s += buf;
      }
    }
    // Norm bars, feature 0 (most important) on top; the bar's full width is norm 1.5.
    const int y0 = 50 + plane;
    for (int i = 0; i < p.n; ++i) {
      const double w = std::min(1.5, p.norms[i]) / 1.5 * 150;
      std::snprintf(
          buf, sizeof buf,
          "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"11\" fill=\"%s\"><title>feature %d: norm %.3f, "
          "superposition %.3f</title></rect>\n",
          x0 + 20, y0 + 14 * i, w, superposition_colour(p.superposition[i]).c_str(), i, p.norms[i],
          p.superposition[i]);
      s += buf;
      std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" fill=\"#666\">%d</text>\n", x0,
                    y0 + 14 * i + 10, i);
      s += buf;
    }
  }
  std::snprintf(
      buf, sizeof buf,
      "<text x=\"10\" y=\"%d\" fill=\"#666\">bars: ||W_i|| (full width 1.5), feature 0 the most important; "
      "colour: superposition, dark 0 to yellow 1</text>\n</svg>\n",
      height - 10);
  s += buf;
  return s;
}

}  // namespace findings
