// Toy Models of Superposition's first figures as one self-contained SVG: for each sparsity of a sweep, the
// features' norms ||W_i|| as bars coloured by their superposition (dark: alone in their direction, bright:
// sharing it) and, when m is 2, the columns W_i drawn as vectors in the plane (the pentagon).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

// One trained toy model: its sparsity, weights, loss and what the figure shows of it.
struct TmsPanel {
  double sparsity = 0;
  int m = 0, n = 0;
  std::vector<float> W;               // (m, n)
  std::vector<float> b;               // (n)
  double loss = 0;                    // the importance-weighted MSE on fresh samples
  std::vector<double> norms;          // per feature
  std::vector<double> superposition;  // per feature, sum_{j != i} (W_i / ||W_i|| . W_j)^2
};

// `attograd tms`'s result: n features in m dimensions with importance^i, one model per sparsity.
struct TmsReport {
  int n = 0, m = 0;
  double importance = 0.9;
  std::vector<TmsPanel> panels;
};

// One model as {"W" (m rows of n), "b", "loss"}.
nlohmann::json tms_panel_to_json(const TmsPanel& p);

// Each model's line: its sparsity, loss, every feature's norm (superposition) and how many it stores
// (norm above 0.5), under a line naming n, m and the importance.
std::string tms_table(const TmsReport& r);

// The figure's title.
std::string tms_title(const TmsReport& r);

std::string svg_tms(const std::string& title, const std::vector<TmsPanel>& panels);

}  // namespace findings
