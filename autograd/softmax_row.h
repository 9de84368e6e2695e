// One row of softmax, shared by the softmax op (ops_softmax.cpp) and the fused attention op
// (ops_attention.cpp), so that both give the same numbers for the same scores.
#pragma once

#include <cstdint>
#include <limits>

#include "autograd/tensor.h"

namespace ag {

// y = softmax(x) over n values; x and y must not overlap. A row that is all -inf (a query that may attend
// to nothing) gives zeros rather than the NaN of exp(-inf - -inf). An entry of -inf gives exactly 0:
// Eigen's vectorised exp maps -inf to a denormal, so it is fixed up after the exp, in a branch-free loop
// the compiler vectorises.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n) {
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  ConstVecMap<T> xr(x, n);
  VecMap<T> yr(y, n);
  const T m = xr.maxCoeff();
  if (m == neg_inf) {
    yr.setZero();
    return;
  }
  yr = (xr - m).exp();
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] == neg_inf ? T(0) : y[j];
  yr *= T(1) / yr.sum();
}

}  // namespace ag
