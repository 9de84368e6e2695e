// Labelled value matrices as SVG (see svg_matrix.h). Label widths come from character counts, as in
// svg_heatmap.cpp, because an SVG file cannot measure its text.
#include "findings/svg_matrix.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "findings/svg_heatmap.h"
#include "findings/utf8_label.h"
#include "io/append_format.h"

namespace findings {
namespace {

constexpr double kFont = 11, kCharW = 0.62 * kFont, kMargin = 16, kGap = 26, kTitleH = 20;
constexpr int kMaxLabel = 16;

// A round scale end: 1, 2 or 5 times a power of ten, at least |top|.
double round_up(double top) {
  if (!(top > 0) || !std::isfinite(top)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(top)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= top * (1 - 1e-12)) return m * mag;
  return 10 * mag;
}

}  // namespace

std::string svg_matrices(const std::vector<MatrixPanel>& panels, const MatrixSvgOptions& opts) {
  double top = 0;
  int row_chars = 3, col_chars = 3;
  size_t max_cols = 1;
  for (const MatrixPanel& p : panels) {
    if (p.values.size() != p.row_labels.size())
      throw std::invalid_argument("svg_matrices: panel '" + p.title + "' has " +
                                  std::to_string(p.values.size()) + " rows of values for " +
                                  std::to_string(p.row_labels.size()) + " row labels");
    for (const auto& row : p.values) {
      if (row.size() != p.col_labels.size())
        throw std::invalid_argument("svg_matrices: panel '" + p.title + "' has a row of " +
                                    std::to_string(row.size()) + " values for " +
                                    std::to_string(p.col_labels.size()) + " column labels");
      for (double v : row)
        if (std::isfinite(v)) top = std::max(top, opts.diverging ? std::fabs(v) : v);
    }
    for (const std::string& s : p.row_labels)
      row_chars = std::max(row_chars, std::min(kMaxLabel, display_width(s)));
    for (const std::string& s : p.col_labels)
      col_chars = std::max(col_chars, std::min(kMaxLabel, display_width(s)));
    max_cols = std::max(max_cols, p.col_labels.size());
  }
  const double range = opts.range > 0 ? opts.range : round_up(top);
  // Small matrices (composition scores: heads x heads) get cells wide enough to print their values.
  size_t max_rows = 0;
  for (const MatrixPanel& p : panels) max_rows = std::max(max_rows, p.row_labels.size());
  const bool print_values = max_cols <= 8 && max_rows <= 16;
  const double cell = print_values ? 40 : max_cols <= 24 ? 20 : std::max(10.0, 480.0 / max_cols);
  const double left = row_chars * kCharW + 8, band = col_chars * kCharW + 8;
  const char* fmt = opts.value_format.empty() ? "%.3f" : opts.value_format.c_str();
  auto label = [](const std::string& s) { return cut_label(s, kMaxLabel); };
  auto colour = [&](double v) {
    return opts.diverging ? diverging_colour(v / range) : sequential_colour(v / range);
  };

  std::string body;
  double y = kMargin;
  if (!opts.title.empty()) {
    io::append_format(
        body, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\" fill=\"#111\">%s</text>\n",
        kMargin, y + 15, xml_escape(opts.title).c_str());
    y += 24;
  }
  if (!opts.note.empty()) {
    io::append_format(body, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">%s</text>\n", kMargin,
                      y + 12, xml_escape(opts.note).c_str());
    y += 22;
  }
  // Wide enough for the title and the note: text is measured by characters, bold at 0.66 of its size.
  double width = std::max({560.0, 2 * kMargin + display_width(opts.title) * 16 * 0.66,
                           2 * kMargin + display_width(opts.note) * 12 * 0.62});
  for (const MatrixPanel& p : panels) {
    const double gx = kMargin + left, gy = y + kTitleH + band;
    io::append_format(
        body,
        "<g>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" fill=\"#222\">%s</text>\n",
        gx, y + 14, xml_escape(p.title).c_str());
    io::append_format(
        body,
        "<g font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"%.0f\" fill=\"#333\">\n",
        kFont);
    for (size_t j = 0; j < p.col_labels.size(); ++j) {
      const double cx = gx + (j + 0.5) * cell + kFont * 0.35, cy = gy - 4;
      io::append_format(body, "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                        cx, cy, cx, cy, xml_escape(label(p.col_labels[j])).c_str());
    }
    for (size_t i = 0; i < p.row_labels.size(); ++i)
      io::append_format(body, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", gx - 4,
                        gy + (i + 0.5) * cell + kFont * 0.35, xml_escape(label(p.row_labels[i])).c_str());
    body += "</g>\n";
    for (size_t i = 0; i < p.values.size(); ++i)
      for (size_t j = 0; j < p.values[i].size(); ++j) {
        const double v = p.values[i][j];
        io::append_format(
            body, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
            gx + j * cell, gy + i * cell, cell, cell, std::isfinite(v) ? colour(v).c_str() : "url(#none)");
        body += xml_escape(p.row_labels[i] + " \u00b7 " + p.col_labels[j]) + ": ";
        if (std::isfinite(v))
          io::append_format(body, fmt, v);
        else
          body += "no value";
        body += "</title></rect>\n";
        if (print_values && std::isfinite(v)) {
          const double shade = v / range;
          const bool dark = opts.diverging ? std::fabs(shade) > 0.6 : shade > 0.55;
          io::append_format(body,
                            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" fill=\"%s\" "
                            "pointer-events=\"none\">",
                            gx + (j + 0.5) * cell, gy + (i + 0.5) * cell + 3.5, dark ? "#fff" : "#111");
          io::append_format(body, range >= 10 ? "%.1f" : "%.2f", v);
          body += "</text>\n";
        }
      }
    io::append_format(
        body,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n</g>\n",
        gx, gy, p.col_labels.size() * cell, p.row_labels.size() * cell);
    width = std::max({width, gx + p.col_labels.size() * cell + kMargin,
                      gx + display_width(p.title) * 13 * 0.66 + kMargin});
    y = gy + p.row_labels.size() * cell + kGap;
  }
  // The legend bar with five ticks across the scale.
  const double lo = opts.diverging ? -range : 0, bw = 240, bh = 12;
  io::append_format(body, "<g font-size=\"11\" fill=\"#333\">\n<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                    kMargin, y + 10, xml_escape(opts.legend).c_str());
  io::append_format(
      body,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"url(#scale)\" stroke=\"#888\"/>\n",
      kMargin, y + 16, bw, bh);
  for (int k = 0; k <= 4; ++k) {
    const double t = lo + (range - lo) * k / 4, tx = kMargin + bw * k / 4;
    io::append_format(body, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", tx,
                      y + 16 + bh, tx, y + 20 + bh);
    io::append_format(body, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", tx, y + 31 + bh,
                      t);
  }
  body += "</g>\n";
  width = std::max(width, 2 * kMargin + display_width(opts.legend) * 11 * 0.62);
  const double height = y + 56;

  std::string out;
  io::append_format(
      out,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<defs>\n",
      width, height, width, height);
  out += "<linearGradient id=\"scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k)
    io::append_format(out, "<stop offset=\"%.1f\" stop-color=\"%s\"/>", k / 10.0,
                      (opts.diverging ? diverging_colour(k / 5.0 - 1) : sequential_colour(k / 10.0)).c_str());
  out +=
      "</linearGradient>\n<pattern id=\"none\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/><line x1=\"0\" "
      "y1=\"0\" "
      "x2=\"0\" y2=\"6\" stroke=\"#b0b0b0\" stroke-width=\"2\"/></pattern>\n</defs>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n" + body + "</svg>\n";
  return out;
}

}  // namespace findings
