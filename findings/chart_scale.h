// What the SVG charts of report.html and a sweep's index.html share: round axis ticks and the categorical
// palette (one colour per head, or per setting).
#pragma once

#include <cstddef>
#include <vector>

namespace findings {

// Round tick values (1, 2, 5 x 10^k) covering [lo, hi] with about n intervals.
std::vector<double> nice_ticks(double lo, double hi, int n);

// Ticks for a log axis over [lo, hi] (both > 0): the powers of ten inside, with 2 and 5 times them when
// the range spans fewer than three decades; the range's ends rounded out to a power of ten are lo_out and
// hi_out. Non-positive or reversed inputs give {1}.
std::vector<double> log_ticks(double lo, double hi, double* lo_out = nullptr, double* hi_out = nullptr);

// The k-th colour of a 10-colour categorical palette, repeating after 10.
const char* category_colour(size_t k);

}  // namespace findings
