// Finite-difference gradient checker, in float64: analytic gradients from backward() against central
// differences, per input tensor. Used by every op's test and by `attograd gradcheck`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

struct GradcheckOptions {
  // Central-difference step: truncation error grows as eps^2, round-off as 1e-16 / eps; 1e-5 balances them.
  double eps = 1e-5;
  // Relative error of one element: |analytic - numeric| / max(|analytic|, |numeric|, floor). The floor
  // keeps near-zero gradients from turning round-off into a large relative error.
  double floor = 1e-3;
  uint64_t seed = 1234;  // for the random projection of a non-scalar output (and the sample below)
  // Check at most this many elements of each input, drawn at random from the seed without repeats (0: every
  // element): for checks over many large inputs, where each element costs two evaluations of f.
  int64_t max_elements = 0;
  // An element whose central difference D(h) is further than this (relative) from backward, by an error
  // that D(h/2) shrinks to about a quarter (truncation, c h^2), is estimated again by Richardson
  // extrapolation, (4 D(h/2) - D(h)) / 3, whose truncation error is O(h^4): a function with a large third
  // derivative (QK-norm's and RMSNorm's of small vectors) then passes on its gradient, not on the step. A
  // wrong gradient's error does not shrink with h and is reported as D(h)'s.
  double refine_above = 1e-7;
};

struct GradcheckResult {
  std::vector<double> worst_rel_error;  // one per input, over its elements
  std::vector<int64_t> worst_index;     // the element where that happened
  double worst() const;
  std::string report(const std::vector<std::string>& names = {}) const;
};

// f maps the inputs to any tensor; its output is reduced to a scalar by a fixed random projection
// sum(w * f(x)), so every output element is checked. Only inputs with requires_grad are perturbed
// (the others report 0).
GradcheckResult gradcheck(const std::function<Tensor<double>(const std::vector<Tensor<double>>&)>& f,
                          std::vector<Tensor<double>> inputs, const GradcheckOptions& options = {});

}  // namespace ag
