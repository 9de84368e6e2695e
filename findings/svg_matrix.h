// Labelled value matrices as one self-contained SVG (activation patching, composition scores): panels of
// rows x columns with their own labels, all on one colour scale with a legend bar. Diverging scales are
// centred on 0 (white) and symmetric up to the largest |value|, so the sign reads as the colour; sequential
// scales run from 0 (white) to the largest value. NaN cells are drawn hatched ("no value").
// Not for attention maps (svg_heatmap draws those with masked cells and token pairs).
#pragma once

#include <string>
#include <vector>

namespace findings {

struct MatrixPanel {
  std::string title;
  std::vector<std::string> row_labels, col_labels;
  std::vector<std::vector<double>> values;  // [rows][cols]
};

struct MatrixSvgOptions {
  std::string title;         // above everything, when not empty
  std::string note;          // one grey line under the title
  std::string legend;        // the colour bar's caption
  bool diverging = true;     // blue < 0 < red, centred on 0; else white to blue from 0
  double range = 0;          // the scale's end (|value| at full colour); 0 picks the largest |value|
  std::string value_format;  // printf format of a tooltip value; "%.3f" when empty
};

// Panels stacked top to bottom. Matrices of at most 8 columns and 16 rows print each value in its cell
// (and every cell has its value as a tooltip). Throws std::invalid_argument when a panel's values do not have
// row_labels.size() rows of col_labels.size() columns.
std::string svg_matrices(const std::vector<MatrixPanel>& panels, const MatrixSvgOptions& opts);

}  // namespace findings
