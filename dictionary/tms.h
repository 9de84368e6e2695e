// Toy Models of Superposition (Elhage et al. 2022): n features compressed into m < n dimensions and read
// back, x' = ReLU(W^T W x + b) with W (m, n), trained with AdamW on an importance-weighted MSE. Each
// feature is 0 with probability `sparsity`, else uniform in [0, 1); feature i's importance is
// importance^i. Dense inputs make the model keep the m most important features; sparse ones let it store
// more in superposition (for n 5, m 2: a pentagon). The importance must decay for the dense regime to
// pick m features: with equal importances every rank-m projection of the features is about as good, and
// training ends on one that spreads the m dimensions over all n (norms ~0.4 to 0.8 each).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/tms_view.h"

namespace dictionary {

struct TmsConfig {
  int n = 5, m = 2;
  double sparsity = 0.0;    // probability that a feature is 0
  double importance = 0.9;  // feature i's importance is importance^i (the paper's 0.9 for n 5, m 2)
  int steps = 5000;
  int batch_size = 1024;
  double lr = 1e-3;
  uint64_t seed = 1;
};

struct TmsResult {
  std::vector<float> W;  // (m, n)
  std::vector<float> b;  // (n)
  double loss = 0;       // the importance-weighted MSE on 8192 fresh samples
};

TmsResult train_tms(const TmsConfig& config);

// ||W_i|| of each feature (column), and its superposition sum_{j != i} (W_i / ||W_i|| . W_j)^2.
std::vector<double> tms_norms(const TmsResult& r, int m, int n);
std::vector<double> tms_superposition(const TmsResult& r, int m, int n);

// `attograd tms` as a library call: one model at `sparsity`, or (sweep) one per sparsity of
// tms_sweep_sparsities() with the figure written to `figure`.
struct TmsRequest {
  int n = 5, m = 2;         // features, hidden dimensions (m < n)
  double sparsity = 0.0;    // probability that a feature is 0 (one model; not with sweep)
  double importance = 0.9;  // feature i's importance is importance^i (the paper's 0.9 for n 5, m 2)
  int steps = 5000;
  uint64_t seed = 1;
  bool sweep = false;
  std::string figure;  // with sweep: the SVG's file; "" = io::layout::tms_figure(n, m)
};

const std::vector<double>& tms_sweep_sparsities();

// Checks the request (RequestError "m 4: expected fewer dimensions than n (3)"), trains, and with sweep
// writes the figure (Output::wrote).
analysis::Output<findings::TmsReport> tms(const TmsRequest& request);

}  // namespace dictionary
