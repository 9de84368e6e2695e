// Softmax over rows, shared by the softmax op (ops_softmax.cpp) and the fused attention op
// (ops_attention.cpp), so that both give the same numbers for the same scores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "autograd/tensor.h"

namespace ag {

// y = softmax(x) along each of `rows` rows of n values, row r at x + r * stride and y + r * stride; y may
// be x (each entry is read before it is written). A row that is all -inf (a query that may attend to
// nothing) gives zeros rather than the NaN of exp(-inf - -inf); an entry of -inf gives exactly 0.
//
// Written on Eigen's packet primitives (the SIMD layer under its expressions) as three passes: the
// maximum, exp with the sum in the same pass, the scaling. The expression form takes five (max, exp, a
// fix-up of -inf, sum, scale), each with its own reduction tail, which dominates a row as short as
// attention's (32 floats).
// Each pass runs over a group of rows before the next pass starts: a row of 32 floats is a few packets,
// and the exp of one packet is a chain of ~25 dependent instructions, so one row at a time keeps the
// core waiting on that chain and on each row's reductions; a loop over independent rows lets the core
// overlap them. Every row still gets exactly the operations, in the same order, as alone.
// The last partial packet is computed as a whole one on a copy padded with -inf, so every entry gets
// the same vectorised exp, wherever it sits in the row.
template <typename T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t n, int64_t stride) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = ei::packet_traits<T>::size, kGroup = 8;
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t whole = n / kLanes * kLanes, rest = n - whole;
  const P neg_inf_v = ei::pset1<P>(neg_inf), zero = ei::pset1<P>(T(0));
  alignas(64) T tails[kGroup][kLanes];
  alignas(64) T lanes[kLanes];
  T maxes[kGroup], inverses[kGroup];

  for (int64_t g0 = 0; g0 < rows; g0 += kGroup) {
    const int64_t g = std::min(kGroup, rows - g0);
    for (int64_t r = 0; r < g; ++r) {
      const T* xr = x + (g0 + r) * stride;
      P max_v = neg_inf_v;
      for (int64_t j = 0; j < whole; j += kLanes) max_v = ei::pmax(max_v, ei::ploadu<P>(xr + j));
      if (rest) {
        std::fill(tails[r], tails[r] + kLanes, neg_inf);
        std::copy(xr + whole, xr + n, tails[r]);
        max_v = ei::pmax(max_v, ei::pload<P>(tails[r]));
      }
      // Reduced through memory: Eigen's predux_max on AVX-512 trips GCC 12's -Wuninitialized in its
      // intrinsics header.
      ei::pstore(lanes, max_v);
      maxes[r] = *std::max_element(lanes, lanes + kLanes);
    }

    // Masked entries are selected to 0, and their exp is taken of 0 rather than of -inf - m: Eigen's
    // vectorised exp gives a denormal there, not 0, and on some CPUs each packet that makes one costs a
    // microcode assist, which slows a masked attention (a third of its entries masked at T 32) badly.
    for (int64_t r = 0; r < g; ++r) {
      T* yr = y + (g0 + r) * stride;
      if (maxes[r] == neg_inf) {
        std::fill(yr, yr + n, T(0));
        continue;
      }
      const T* xr = x + (g0 + r) * stride;
      const P m_v = ei::pset1<P>(maxes[r]);
      P sum_v = zero;
      auto exp_packet = [&](const P& xv) {
        const P masked = ei::pcmp_eq(xv, neg_inf_v);
        const P e = ei::pselect(masked, zero, ei::pexp(ei::pselect(masked, zero, ei::psub(xv, m_v))));
        sum_v = ei::padd(sum_v, e);
        return e;
      };
      for (int64_t j = 0; j < whole; j += kLanes) ei::pstoreu(yr + j, exp_packet(ei::ploadu<P>(xr + j)));
      if (rest) ei::pstore(tails[r], exp_packet(ei::pload<P>(tails[r])));
      inverses[r] = T(1) / ei::predux(sum_v);
    }

    for (int64_t r = 0; r < g; ++r) {
      if (maxes[r] == neg_inf) continue;
      T* yr = y + (g0 + r) * stride;
      const P inv = ei::pset1<P>(inverses[r]);
      for (int64_t j = 0; j < whole; j += kLanes) ei::pstoreu(yr + j, ei::pmul(ei::ploadu<P>(yr + j), inv));
      for (int64_t j = 0; j < rest; ++j) yr[whole + j] = tails[r][j] * inverses[r];
    }
  }
}

// One row: softmax_rows for a single row of n values.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n) {
  softmax_rows(x, y, 1, n, n);
}

}  // namespace ag
