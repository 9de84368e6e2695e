// One row of softmax, shared by the softmax op (ops_softmax.cpp) and the fused attention op
// (ops_attention.cpp), so that both give the same numbers for the same scores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "autograd/tensor.h"

namespace ag {

// y = softmax(x) over n values; y may be x itself (each entry is read before it is written). A row that
// is all -inf (a query that may attend to nothing) gives zeros rather than the NaN of exp(-inf - -inf); an
// entry of -inf gives exactly 0.
//
// Written on Eigen's packet primitives (the SIMD layer under its expressions) as three passes: the
// maximum, exp with the sum in the same pass, the scaling. The expression form took five (max, exp, a
// fix-up of -inf, sum, scale), each with its own reduction tail: 88 ns for a row of 32 floats against
// 22 here (AVX-512), where attention's rows are that short (it was a quarter of the tiny config's
// attention time).
// The last partial packet is computed as a whole one on a copy padded with -inf, so every entry gets
// the same vectorised exp, wherever it sits in the row.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = ei::packet_traits<T>::size;
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t whole = n / kLanes * kLanes, rest = n - whole;
  alignas(64) T tail[kLanes];
  if (rest) {
    std::fill(tail, tail + kLanes, neg_inf);
    std::copy(x + whole, x + n, tail);
  }

  P max_v = ei::pset1<P>(neg_inf);
  for (int64_t j = 0; j < whole; j += kLanes) max_v = ei::pmax(max_v, ei::ploadu<P>(x + j));
  if (rest) max_v = ei::pmax(max_v, ei::pload<P>(tail));
  // Reduced through memory: Eigen's predux_max on AVX-512 trips GCC 12's -Wuninitialized in its
  // intrinsics header.
  alignas(64) T lanes[kLanes];
  ei::pstore(lanes, max_v);
  const T m = *std::max_element(lanes, lanes + kLanes);
  if (m == neg_inf) {
    std::fill(y, y + n, T(0));
    return;
  }

  // exp(-inf - m) is a denormal in Eigen's vectorised exp, not 0: masked entries are selected to 0.
  const P m_v = ei::pset1<P>(m), neg_inf_v = ei::pset1<P>(neg_inf), zero = ei::pset1<P>(T(0));
  P sum_v = zero;
  auto exp_packet = [&](const P& xv) {
    const P e = ei::pselect(ei::pcmp_eq(xv, neg_inf_v), zero, ei::pexp(ei::psub(xv, m_v)));
    sum_v = ei::padd(sum_v, e);
    return e;
  };
  for (int64_t j = 0; j < whole; j += kLanes) ei::pstoreu(y + j, exp_packet(ei::ploadu<P>(x + j)));
  if (rest) ei::pstore(tail, exp_packet(ei::pload<P>(tail)));

  const P inv = ei::pset1<P>(T(1) / ei::predux(sum_v));
  for (int64_t j = 0; j < whole; j += kLanes) ei::pstoreu(y + j, ei::pmul(ei::ploadu<P>(y + j), inv));
  for (int64_t j = 0; j < rest; ++j) y[whole + j] = tail[j] * ei::pfirst(inv);
}

}  // namespace ag
