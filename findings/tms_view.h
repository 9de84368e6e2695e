// Toy Models of Superposition's first figures as one self-contained SVG: for each sparsity of a sweep, the
// features' norms ||W_i|| as bars coloured by their superposition (dark: alone in their direction, bright:
// sharing it) and, when m is 2, the columns W_i drawn as vectors in the plane (the pentagon).
#pragma once

#include <string>
#include <vector>

namespace findings {

struct TmsPanel {
  double sparsity = 0;
  int m = 0, n = 0;
  std::vector<float> W;               // (m, n)
  std::vector<double> norms;          // per feature
  std::vector<double> superposition;  // per feature, sum_{j != i} (W_i / ||W_i|| . W_j)^2
};

std::string svg_tms(const std::string& title, const std::vector<TmsPanel>& panels);

}  // namespace findings
