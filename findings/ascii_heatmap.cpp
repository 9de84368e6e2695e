// Terminal heatmaps, weight tables, head grids and difference maps (see ascii_heatmap.h).
#include "findings/ascii_heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "findings/utf8_label.h"

namespace findings {
namespace {

constexpr const char* kGlyphs[5] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};
constexpr const char* kMasked = "\u00b7";  // '·'

void pad_right(std::string& out, const std::string& s, int cols) {
  const std::string f = cut_label(s, cols);
  out += f;
  out.append(static_cast<size_t>(cols - display_width(f)), ' ');
}

void pad_left(std::string& out, const std::string& s, int cols) {
  const std::string f = cut_label(s, cols);
  out.append(static_cast<size_t>(cols - display_width(f)), ' ');
  out += f;
}

void repeat(std::string& out, const char* glyph, int n) {
  for (int k = 0; k < n; ++k) out += glyph;
}

void check_labels(const AttentionWeights& w, const std::vector<std::string>& rows,
                  const std::vector<std::string>& cols, const char* what) {
  check_square(w, what);
  if (rows.size() != w.size() || cols.size() != w.size())
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(w.size()) +
                                " row and column labels, got " + std::to_string(rows.size()) + " and " +
                                std::to_string(cols.size()));
}

float max_weight(const AttentionWeights& w) {
  float m = 0;
  for (const auto& row : w)
    for (float v : row) m = std::max(m, v);
  return m;
}

int label_width(const std::vector<std::string>& labels, int cap) {
  int lw = 1;
  for (const auto& s : labels) lw = std::max(lw, display_width(s));
  return std::min(lw, cap);
}

std::string fmt(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The column-label line: `indent` spaces, then each label cut to `label_cols` in a slot `cell` wide.
void column_header(std::string& out, const std::vector<std::string>& labels, int indent, int label_cols,
                   int cell) {
  out.append(static_cast<size_t>(indent), ' ');
  for (const std::string& l : labels) pad_right(out, cut_label(l, label_cols), cell);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += '\n';
}

// Draws '·' in cell (i, j) when it is a future key and masks are shown; says whether it did.
bool masked_cell(std::string& out, const AsciiOptions& opts, int i, int j, int cell) {
  if (!opts.mark_future || j <= i) return false;
  out += kMasked;
  out.append(static_cast<size_t>(cell - 1), ' ');
  return true;
}

std::string level_legend(const std::string& of) {
  return std::string("levels of ") + of + ": ' '<20% " + kGlyphs[1] + "<40% " + kGlyphs[2] + "<60% " +
         kGlyphs[3] + "<80% " + kGlyphs[4] + "<=100%";
}

// The legend's note on the '·' cells, when they are drawn.
std::string masked_note(const AsciiOptions& opts) {
  return opts.mark_future ? std::string("; ") + kMasked + " masked" : "";
}

}  // namespace

int heat_level(float w, float top) {
  if (!(w > 0) || !(top > 0)) return 0;
  const int level = static_cast<int>(std::floor(static_cast<double>(w) / top * 5.0 + 1e-6));
  return std::min(4, std::max(0, level));
}

const char* heat_glyph(int level) {
  return kGlyphs[std::min(4, std::max(0, level))];
}

std::string ascii_heatmap(const AttentionWeights& w, const std::vector<std::string>& row_labels,
                          const std::vector<std::string>& col_labels, const AsciiOptions& opts) {
  check_labels(w, row_labels, col_labels, "ascii_heatmap");
  const int T = static_cast<int>(w.size());
  const int lw = label_width(row_labels, 10);
  // Cells up to six columns wide, as in the lesson; narrower when T tokens must share the width.
  const int cell = std::clamp((opts.width - lw - 1) / std::max(1, T), 1, 6);
  const int ink = cell >= 2 ? cell - 1 : 1;  // glyph columns per cell; the rest is a gap between columns
  const float top = opts.absolute_scale ? 1.0f : max_weight(w);

  std::string out;
  // Labels as wide as the glyphs, so neighbouring labels keep a gap as the columns do.
  column_header(out, col_labels, lw + 1, ink, cell);
  for (int i = 0; i < T; ++i) {
    pad_left(out, row_labels[i], lw);
    out += ' ';
    for (int j = 0; j < T; ++j) {
      if (masked_cell(out, opts, i, j, cell)) continue;
      repeat(out, heat_glyph(heat_level(w[i][j], top)), ink);
      out.append(static_cast<size_t>(cell - ink), ' ');
    }
    out += '\n';
  }
  out += level_legend(opts.absolute_scale ? std::string("1") : "max " + fmt("%.3f", top));
  out += masked_note(opts);
  out += '\n';
  return out;
}

std::string weight_table(const AttentionWeights& w, const std::vector<std::string>& row_labels,
                         const std::vector<std::string>& col_labels, int decimals, int width) {
  check_labels(w, row_labels, col_labels, "weight_table");
  const int T = static_cast<int>(w.size());
  decimals = std::clamp(decimals, 0, 6);
  const int lw = label_width(row_labels, 10);
  const int cell = decimals + 3;  // "0.25" plus a leading space: numbers never touch
  // Blocks of nearly equal size (17 columns as 9 + 8, not 15 + 2).
  const int fits = std::max(1, (width - lw) / cell);
  const int blocks = (T + fits - 1) / fits;
  const int per_block = std::max(1, (T + blocks - 1) / blocks);
  char f[16];
  std::snprintf(f, sizeof f, "%%%d.%df", cell, decimals);
  std::string out;
  for (int j0 = 0; j0 < T; j0 += per_block) {
    const int j1 = std::min(T, j0 + per_block);
    if (per_block < T) {
      if (j0 > 0) out += '\n';
      out += "keys " + std::to_string(j0) + ".." + std::to_string(j1 - 1) + "\n";
    }
    out.append(static_cast<size_t>(lw), ' ');
    for (int j = j0; j < j1; ++j) pad_left(out, col_labels[j], cell);
    out += '\n';
    for (int i = 0; i < T; ++i) {
      pad_left(out, row_labels[i], lw);
      for (int j = j0; j < j1; ++j) out += fmt(f, w[i][j]);
      out += '\n';
    }
  }
  return out;
}

std::string ascii_grid(const Probe& probe, const AsciiOptions& opts) {
  const int T = static_cast<int>(probe.tokens.size());
  for (const HeadMap& m : probe.maps) {
    check_square(m.weights, "ascii_grid");
    if (static_cast<int>(m.weights.size()) != T)
      throw std::invalid_argument("ascii_grid: expected " + std::to_string(T) + " x " + std::to_string(T) +
                                  " maps (one row per token), got layer " + std::to_string(m.layer) +
                                  " head " + std::to_string(m.head) + " with " +
                                  std::to_string(m.weights.size()));
  }
  const auto layers = maps_by_layer(probe);
  size_t max_heads = 1;
  for (const auto& l : layers) max_heads = std::max(max_heads, l.size());
  const int lw = label_width(probe.tokens, 6);
  const int gap = 2;
  const int heads = static_cast<int>(max_heads);
  // Two columns per cell look square in a terminal; fall back to one when the heads would not fit.
  const int cell = lw + 1 + heads * 2 * T + (heads - 1) * gap <= opts.width ? 2 : 1;
  const int panel = cell * T;
  const int per_line = std::max(1, (opts.width - lw - 1 + gap) / (panel + gap));
  bool tokens_fit = true;
  for (const std::string& t : probe.tokens) tokens_fit = tokens_fit && display_width(t) <= cell;

  std::string out;
  for (const auto& layer : layers) {
    for (size_t h0 = 0; h0 < layer.size(); h0 += per_line) {
      const size_t h1 = std::min(layer.size(), h0 + per_line);
      // Title line: "L0 H1" and, when it fits, the scale top of that panel.
      std::string line(static_cast<size_t>(lw + 1), ' ');
      for (size_t h = h0; h < h1; ++h) {
        const HeadMap& m = *layer[h];
        std::string title = head_name(m.layer, m.head);
        const std::string with_top =
            title + (opts.absolute_scale ? "" : " max " + fmt("%.2f", max_weight(m.weights)));
        pad_right(line, display_width(with_top) <= panel ? with_top : title, panel);
        if (h + 1 < h1) line.append(gap, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + '\n';
      // Key tokens when each fits its cell; otherwise key positions mod 10, which stay unambiguous
      // where cut tokens would not ("<BOS>", "t4" and "t9" all start with a letter or '<').
      line.assign(static_cast<size_t>(lw + 1), ' ');
      for (size_t h = h0; h < h1; ++h) {
        for (int j = 0; j < T; ++j)
          pad_right(line, tokens_fit ? probe.tokens[j] : std::to_string(j % 10), cell);
        if (h + 1 < h1) line.append(gap, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + '\n';
      for (int i = 0; i < T; ++i) {
        line.clear();
        pad_left(line, probe.tokens[i], lw);
        line += ' ';
        for (size_t h = h0; h < h1; ++h) {
          const AttentionWeights& w = layer[h]->weights;
          const float top = opts.absolute_scale ? 1.0f : max_weight(w);
          for (int j = 0; j < T; ++j) {
            if (!masked_cell(line, opts, i, j, cell))
              repeat(line, heat_glyph(heat_level(w[i][j], top)), cell);
          }
          if (h + 1 < h1) line.append(gap, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + '\n';
      }
      out += '\n';
    }
  }
  out += tokens_fit ? "rows: query (destination), columns: key (source)\n"
                    : "rows: query (destination), columns: key (source) positions, mod 10\n";
  out += level_legend(opts.absolute_scale ? "1" : "each panel's max");
  out += masked_note(opts);
  out += '\n';
  return out;
}

std::string ascii_difference(const AttentionWeights& a, const AttentionWeights& b,
                             const std::vector<std::string>& row_labels,
                             const std::vector<std::string>& col_labels, const AsciiOptions& opts) {
  check_labels(a, row_labels, col_labels, "ascii_difference");
  check_labels(b, row_labels, col_labels, "ascii_difference");
  const int T = static_cast<int>(a.size());
  float top = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) top = std::max(top, std::fabs(a[i][j] - b[i][j]));
  const int lw = label_width(row_labels, 10);
  const int cell = std::clamp((opts.width - lw - 1) / std::max(1, T), 2, 6);
  const int ink = cell >= 3 ? cell - 2 : 1;  // glyph columns after the sign

  std::string out;
  column_header(out, col_labels, lw + 1, cell - 1, cell);
  for (int i = 0; i < T; ++i) {
    std::string line;
    pad_left(line, row_labels[i], lw);
    line += ' ';
    for (int j = 0; j < T; ++j) {
      if (masked_cell(line, opts, i, j, cell)) continue;
      const float d = a[i][j] - b[i][j];
      const int level = heat_level(std::fabs(d), top);
      if (level == 0) {
        line.append(static_cast<size_t>(cell), ' ');
        continue;
      }
      line += d > 0 ? '+' : '-';
      repeat(line, heat_glyph(level), ink);
      line.append(static_cast<size_t>(cell - 1 - ink), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  if (top == 0) {
    out += "A - B: the maps are identical\n";
  } else {
    out +=
        "A - B: + where A looks more, - where B looks more\n" + level_legend("max |A-B| " + fmt("%.3f", top));
    out += masked_note(opts);
    out += '\n';
  }
  return out;
}

}  // namespace findings
