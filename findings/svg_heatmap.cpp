// SVG attention grids and comparisons (see svg_heatmap.h). Geometry is computed from character counts
// because an SVG file cannot measure text: labels use a monospace font whose advance is about 0.6 em.
#include "findings/svg_heatmap.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <utility>

#include "findings/utf8_label.h"
#include "io/append_format.h"

namespace findings {
namespace {

constexpr double kFont = 11;             // label font size, px
constexpr double kCharW = 0.62 * kFont;  // monospace advance, slightly generous
constexpr int kMaxLabelChars = 14;       // longer token labels are cut with '…' (full text in tooltips)
constexpr double kTitleH = 20, kGap = 28, kMargin = 16;
constexpr const char* kMono = "DejaVu Sans Mono, Menlo, Consolas, monospace";
constexpr const char* kSans = "DejaVu Sans, Helvetica, Arial, sans-serif";

struct Rgb {
  double r, g, b;
};

std::string hex(Rgb c) {
  char buf[8];
  auto ch = [](double v) { return static_cast<int>(std::lround(std::clamp(v, 0.0, 255.0))); };
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", ch(c.r), ch(c.g), ch(c.b));
  return buf;
}

// Piecewise-linear interpolation through (position, colour) stops sorted by position.
template <size_t N>
std::string ramp(const std::pair<double, Rgb> (&stops)[N], double t) {
  t = std::clamp(t, stops[0].first, stops[N - 1].first);
  for (size_t k = 1; k < N; ++k) {
    if (t <= stops[k].first) {
      const double u = (t - stops[k - 1].first) / (stops[k].first - stops[k - 1].first);
      const Rgb& a = stops[k - 1].second;
      const Rgb& b = stops[k].second;
      return hex({a.r + u * (b.r - a.r), a.g + u * (b.g - a.g), a.b + u * (b.b - a.b)});
    }
  }
  return hex(stops[N - 1].second);
}

std::string indexed(size_t i, const std::string& token) {
  return "(" + std::to_string(i) + ") " + token;
}

// Panel geometry shared by every panel of one picture.
struct Layout {
  int T = 0;
  double cell = 18;
  double left = 0;  // row-label column width
  double top = 0;   // column-label band height
  double width() const { return left + T * cell; }
  double height() const { return kTitleH + top + T * cell; }
};

Layout layout_for(int T, const std::vector<std::vector<std::string>>& label_sets, int cell_px) {
  Layout l;
  l.T = T;
  l.cell = cell_px > 0 ? cell_px : (T <= 20 ? 18.0 : std::max(6.0, 360.0 / T));
  int chars = 3;
  for (const auto& labels : label_sets)
    for (size_t i = 0; i < labels.size(); ++i)
      chars = std::max(chars, std::min(kMaxLabelChars, display_width(indexed(i, labels[i]))));
  l.left = chars * kCharW + 8;
  l.top = chars * kCharW + 8;
  return l;
}

void open_svg(std::string& out, double w, double h) {
  io::append_format(
      out,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"%s\">\n",
      w, h, w, h, kSans);
  out += "<defs>\n";
  // Masked cells: light grey with diagonal lines, unlike a white weight-0 cell.
  out +=
      "<pattern id=\"masked\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b0b0b0\" stroke-width=\"2\"/></pattern>\n";
  out += "<linearGradient id=\"seq\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k)
    io::append_format(out, "<stop offset=\"%.1f\" stop-color=\"%s\"/>", k / 10.0,
                      sequential_colour(k / 10.0).c_str());
  out += "</linearGradient>\n<linearGradient id=\"div\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k)
    io::append_format(out, "<stop offset=\"%.1f\" stop-color=\"%s\"/>", k / 10.0,
                      diverging_colour(k / 5.0 - 1.0).c_str());
  out += "</linearGradient>\n</defs>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

// One heatmap panel with its title, labels, cells (with tooltips) and border.
// colour(i, j) gives a cell's fill; value(i, j) its tooltip number.
template <typename Colour, typename Value>
void panel(std::string& out, const Layout& l, double x, double y, const std::string& title,
           const std::vector<std::string>& rows, const std::vector<std::string>& cols, bool mark_future,
           Colour colour, Value value) {
  const double gx = x + l.left, gy = y + kTitleH + l.top;
  io::append_format(
      out, "<g>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" fill=\"#222\">%s</text>\n",
      gx, y + 14, xml_escape(title).c_str());
  io::append_format(out, "<g font-family=\"%s\" font-size=\"%.0f\" fill=\"#333\">\n", kMono, kFont);
  for (int j = 0; j < l.T; ++j) {
    // Key labels read upwards from just above their column.
    const double cx = gx + (j + 0.5) * l.cell + kFont * 0.35, cy = gy - 4;
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n", cx,
                      cy, cx, cy, xml_escape(cut_label(indexed(j, cols[j]), kMaxLabelChars)).c_str());
  }
  for (int i = 0; i < l.T; ++i) {
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", gx - 4,
                      gy + (i + 0.5) * l.cell + kFont * 0.35,
                      xml_escape(cut_label(indexed(i, rows[i]), kMaxLabelChars)).c_str());
  }
  out += "</g>\n";
  for (int i = 0; i < l.T; ++i) {
    for (int j = 0; j < l.T; ++j) {
      const bool masked = mark_future && j > i;
      io::append_format(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
                        gx + j * l.cell, gy + i * l.cell, l.cell, l.cell,
                        masked ? "url(#masked)" : colour(i, j).c_str());
      out += xml_escape(indexed(i, rows[i]) + " looks at " + indexed(j, cols[j]));
      if (masked)
        out += ": masked";
      else
        io::append_format(out, ": %.3f", value(i, j));
      out += "</title></rect>\n";
    }
  }
  io::append_format(
      out,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n</g>\n",
      gx, gy, l.T * l.cell, l.T * l.cell);
}

// A horizontal colour bar with ticks; returns its width.
double legend_bar(std::string& out, double x, double y, const char* gradient,
                  const std::vector<double>& ticks, double lo, double hi, const std::string& caption) {
  const double w = 240, h = 12;
  io::append_format(out, "<g font-size=\"11\" fill=\"#333\">\n<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x,
                    y + 10, xml_escape(caption).c_str());
  const double by = y + 16;
  io::append_format(
      out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"url(#%s)\" stroke=\"#888\"/>\n",
      x, by, w, h, gradient);
  for (double t : ticks) {
    const double tx = x + (t - lo) / (hi - lo) * w;
    io::append_format(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", tx,
                      by + h, tx, by + h + 4);
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", tx, by + h + 15,
                      t);
  }
  out += "</g>\n";
  return w;
}

void masked_key(std::string& out, double x, double y) {
  io::append_format(
      out,
      "<g font-size=\"11\" fill=\"#333\"><rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
      "fill=\"url(#masked)\" stroke=\"#888\"/><text x=\"%.1f\" y=\"%.1f\">masked: future key (j &gt; "
      "i)</text></g>\n",
      x, y, x + 20, y + 11);
}

void check_probe(const Probe& p, const char* what) {
  const size_t T = p.tokens.size();
  for (const HeadMap& m : p.maps) {
    bool ok = m.weights.size() == T;
    for (const auto& row : m.weights) ok = ok && row.size() == T;
    if (!ok)
      throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(T) + " x " +
                                  std::to_string(T) + " maps (one row and column per token), layer " +
                                  std::to_string(m.layer) + " head " + std::to_string(m.head) + " is not");
  }
}

// Header lines: optional title and the reading order. Returns the height used.
double header(std::string& out, const std::string& title, const std::string& note) {
  double y = kMargin;
  if (!title.empty()) {
    io::append_format(
        out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"17\" font-weight=\"bold\" fill=\"#111\">%s</text>\n",
        kMargin, y + 16, xml_escape(title).c_str());
    y += 26;
  }
  io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">%s</text>\n", kMargin,
                    y + 12, xml_escape(note).c_str());
  return y + 22;
}

// How wide the header's text runs (measured by characters, bold at 0.66 of its size): the picture is at
// least this wide, so neither line is cut off.
double header_width(const std::string& title, const std::string& note) {
  return 2 * kMargin + std::max(display_width(title) * 17 * 0.66, display_width(note) * 12 * 0.62);
}

}  // namespace

std::string sequential_colour(double w) {
  static const std::pair<double, Rgb> stops[] = {{0.0, {255, 255, 255}},
                                                 {0.25, {198, 219, 239}},
                                                 {0.5, {107, 174, 214}},
                                                 {0.75, {33, 113, 181}},
                                                 {1.0, {8, 48, 107}}};
  return ramp(stops, std::isfinite(w) ? w : 0.0);
}

std::string diverging_colour(double d) {
  static const std::pair<double, Rgb> stops[] = {{-1.0, {33, 102, 172}},
                                                 {-0.5, {146, 197, 222}},
                                                 {0.0, {255, 255, 255}},
                                                 {0.5, {244, 165, 130}},
                                                 {1.0, {178, 24, 43}}};
  return ramp(stops, std::isfinite(d) ? d : 0.0);
}

std::string url_path(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
      out += static_cast<char>(c);
    else
      io::append_format(out, "%%%02X", c);
  }
  return out;
}

std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_attention_grid(const Probe& probe, const SvgOptions& opts) {
  check_probe(probe, "svg_attention_grid");
  const int T = static_cast<int>(probe.tokens.size());
  const auto layers = maps_by_layer(probe);
  int heads = 1;
  for (const auto& l : layers)
    for (const HeadMap* m : l) heads = std::max(heads, m->head + 1);
  const Layout l = layout_for(T, {probe.tokens}, opts.cell);

  std::string body;
  const std::string note =
      "rows: destination (query) tokens; columns: source (key) tokens; colour: attention weight, one scale "
      "for every panel";
  const double top = header(body, opts.title, note);
  // Panels sit in the column of their head number so the same head lines up across layers.
  double y = top;
  for (const auto& layer : layers) {
    for (const HeadMap* m : layer) {
      const double x = kMargin + m->head * (l.width() + kGap);
      const auto& w = m->weights;
      panel(
          body, l, x, y, "layer " + std::to_string(m->layer) + " head " + std::to_string(m->head),
          probe.tokens, probe.tokens, opts.mark_future,
          [&](int i, int j) { return sequential_colour(w[i][j]); },
          [&](int i, int j) { return static_cast<double>(w[i][j]); });
    }
    y += l.height() + kGap;
  }
  legend_bar(body, kMargin, y, "seq", {0, 0.25, 0.5, 0.75, 1}, 0, 1, "attention weight");
  if (opts.mark_future) masked_key(body, kMargin + 270, y + 15);
  const double height = y + 56;
  const double width =
      std::max({kMargin * 2 + heads * l.width() + (heads - 1) * kGap, 560.0, header_width(opts.title, note)});

  std::string out;
  open_svg(out, width, height);
  out += body;
  out += "</svg>\n";
  return out;
}

std::string svg_compare(const Probe& a, const Probe& b, const SvgOptions& opts) {
  check_probe(a, "svg_compare");
  check_probe(b, "svg_compare");
  if (a.tokens.size() != b.tokens.size())
    throw std::invalid_argument("svg_compare: inputs must have the same length, got " +
                                std::to_string(a.tokens.size()) + " and " + std::to_string(b.tokens.size()) +
                                " tokens");
  const auto la = maps_by_layer(a), lb = maps_by_layer(b);
  std::vector<std::pair<const HeadMap*, const HeadMap*>> pairs;
  bool same_heads = la.size() == lb.size();
  for (size_t k = 0; same_heads && k < la.size(); ++k) {
    same_heads = la[k].size() == lb[k].size();
    for (size_t h = 0; same_heads && h < la[k].size(); ++h) {
      same_heads = la[k][h]->layer == lb[k][h]->layer && la[k][h]->head == lb[k][h]->head;
      pairs.push_back({la[k][h], lb[k][h]});
    }
  }
  if (!same_heads)
    throw std::invalid_argument("svg_compare: the two probes must have the same (layer, head) maps");

  const int T = static_cast<int>(a.tokens.size());
  // The difference panel's labels show both tokens where the inputs differ.
  std::vector<std::string> both(a.tokens.size());
  for (size_t i = 0; i < both.size(); ++i)
    both[i] = a.tokens[i] == b.tokens[i] ? a.tokens[i] : a.tokens[i] + "/" + b.tokens[i];
  const Layout l = layout_for(T, {a.tokens, b.tokens, both}, opts.cell);

  double top_diff = 0;
  for (const auto& [ma, mb] : pairs)
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        top_diff = std::max(top_diff, std::fabs(double(ma->weights[i][j]) - mb->weights[i][j]));
  const double range = std::max(0.1, std::ceil(top_diff * 10 - 1e-9) / 10);  // a round legend end

  std::string body;
  const std::string note =
      "each row: one head on input A, on input B, and A - B (red: A looks more, blue: B looks more)";
  const double top = header(body, opts.title, note);
  double y = top;
  for (const auto& [ma, mb] : pairs) {
    const std::string name = "layer " + std::to_string(ma->layer) + " head " + std::to_string(ma->head);
    const auto& wa = ma->weights;
    const auto& wb = mb->weights;
    panel(
        body, l, kMargin, y, name + " \u00b7 A", a.tokens, a.tokens, opts.mark_future,
        [&](int i, int j) { return sequential_colour(wa[i][j]); },
        [&](int i, int j) { return double(wa[i][j]); });
    panel(
        body, l, kMargin + l.width() + kGap, y, name + " \u00b7 B", b.tokens, b.tokens, opts.mark_future,
        [&](int i, int j) { return sequential_colour(wb[i][j]); },
        [&](int i, int j) { return double(wb[i][j]); });
    panel(
        body, l, kMargin + 2 * (l.width() + kGap), y, name + " \u00b7 A \u2212 B", both, both,
        opts.mark_future,
        [&](int i, int j) { return diverging_colour((double(wa[i][j]) - wb[i][j]) / range); },
        [&](int i, int j) { return double(wa[i][j]) - wb[i][j]; });
    y += l.height() + kGap;
  }
  legend_bar(body, kMargin, y, "seq", {0, 0.25, 0.5, 0.75, 1}, 0, 1, "A and B: attention weight");
  legend_bar(body, kMargin + 290, y, "div", {-range, -range / 2, 0, range / 2, range}, -range, range,
             "A \u2212 B: difference (blue B more, red A more)");
  if (opts.mark_future) masked_key(body, kMargin + 580, y + 15);
  const double height = y + 56;
  const double width =
      std::max({kMargin * 2 + 3 * l.width() + 2 * kGap, 800.0, header_width(opts.title, note)});

  std::string out;
  open_svg(out, width, height);
  out += body;
  out += "</svg>\n";
  return out;
}

}  // namespace findings
