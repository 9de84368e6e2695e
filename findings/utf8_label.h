// Token labels in UTF-8 for the terminal and SVG pictures: how many columns one takes, and the one rule for
// cutting a label that does not fit.
#pragma once

#include <string>

namespace findings {

// Columns a UTF-8 string takes, counting one per code point (no East Asian wide characters in task tokens).
int display_width(const std::string& utf8);

// `s` when it fits in `cols` columns; otherwise cut at a code-point boundary to `cols` columns, the last
// of them '…' when cols >= 4 so the reader sees it was cut (a narrower cut has no room to spare for it).
// Empty when cols <= 0.
std::string cut_label(const std::string& s, int cols);

}  // namespace findings
