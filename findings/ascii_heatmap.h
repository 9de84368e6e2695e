// Terminal pictures of attention maps, in the seed lesson's style: five levels " ░▒▓█" (UTF-8), the weight
// table (each row: where that token looks), a compact grid of every head (for `attograd attend`), and a
// signed difference of two maps (for `attograd compare`). Output is plain text that fits `width` columns when
// the sequence allows it (T <= width minus the labels). Not for files: svg_heatmap draws the pictures.
#pragma once

#include <string>
#include <vector>

#include "findings/attention_maps.h"

namespace findings {

struct AsciiOptions {
  int width = 80;  // terminal columns to fit in
  // Draw '·' where j > i (the causal mask) so masked cells read differently from a weight of 0.
  // Off by default: a plain map (the lesson's, without a mask) has no masked cells.
  bool mark_future = false;
  // Levels of the fixed range [0, 1] instead of the map's largest weight; use it to compare heads fairly.
  bool absolute_scale = false;
};

// The level of weight w on a scale whose top is `top` (the map's largest weight, or 1):
//   level = min(4, floor(w / top * 5 + 1e-6)), and 0 when w <= 0 or top <= 0.
// So the five levels are equal bins of the range: ' ' < 20% <= '░' < 40% <= '▒' < 60% <= '▓' < 80% <= '█'.
// (The lesson wrote int(w * 4 / max), which gives '█' only to the maximum itself; equal bins show a head
// that splits its attention two ways at 0.45/0.45 as two strong cells, not two middling ones.)
// The 1e-6 keeps exact decimal boundaries such as 0.2 in the upper bin despite float rounding.
int heat_level(float w, float top);
// " ", "░", "▒", "▓", "█" for levels 0..4 (each one terminal column, 1 or 3 bytes of UTF-8).
const char* heat_glyph(int level);

// One map as a heatmap: query tokens label the rows (right-aligned), key tokens the columns (truncated to
// the cell width), then a legend line with the scale. Labels must have T entries each.
// Throws std::invalid_argument when the map is not T x T or the labels do not match.
std::string ascii_heatmap(const AttentionWeights& w, const std::vector<std::string>& row_labels,
                          const std::vector<std::string>& col_labels, const AsciiOptions& opts = {});

// The weights as numbers with `decimals` places (row = where that query token looks); when the columns do
// not fit `width`, they are printed in blocks of columns, each block headed by its key positions.
std::string weight_table(const AttentionWeights& w, const std::vector<std::string>& row_labels,
                         const std::vector<std::string>& col_labels, int decimals = 2, int width = 80);

// Every head of a probe compactly: one row of panels per layer (wrapped when the heads do not fit), each
// panel titled "L0 H1" with its scale top, cells one or two columns wide, query tokens once at the left.
std::string ascii_grid(const Probe& probe, const AsciiOptions& opts = {});

// The signed difference A - B of two maps of the same shape, for comparing two inputs (or two heads).
// Each cell is a sign and a level: "+▓" means A puts more weight there, "-▓" that B does; the level is
// |A - B| on the five equal bins of the largest |A - B| (blank below 20%). A legend line says so.
std::string ascii_difference(const AttentionWeights& a, const AttentionWeights& b,
                             const std::vector<std::string>& row_labels,
                             const std::vector<std::string>& col_labels, const AsciiOptions& opts = {});

}  // namespace findings
