// What the SVG charts of report.html and a sweep's index.html share: round axis ticks and the categorical
// palette (one colour per head, or per setting).
#pragma once

#include <cstddef>
#include <vector>

namespace findings {

// Round tick values (1, 2, 5 x 10^k) covering [lo, hi] with about n intervals.
std::vector<double> nice_ticks(double lo, double hi, int n);

// The k-th colour of a 10-colour categorical palette, repeating after 10.
const char* category_colour(size_t k);

}  // namespace findings
