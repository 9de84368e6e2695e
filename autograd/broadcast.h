// NumPy broadcasting over up to 4 dims, for the elementwise ops: the output shape, each input's strides
// into the output's index space (0 along broadcast dims), and one loop that visits every output element
// with the matching input offsets. Internal to autograd/.
#pragma once

#include <array>

#include "autograd/tensor.h"

namespace ag {

struct Broadcast {
  std::array<int64_t, 4> dims{1, 1, 1, 1};  // output shape, left-padded with 1s
  std::array<int64_t, 4> stride_a{0, 0, 0, 0};
  std::array<int64_t, 4> stride_b{0, 0, 0, 0};
  Shape out_shape;

  Broadcast(const Shape& a, const Shape& b, const char* op);

  // Calls f(out_index, a_offset, b_offset) for every output element, in row-major order.
  template <typename F>
  void for_each(F&& f) const {
    int64_t i = 0;
    for (int64_t d0 = 0; d0 < dims[0]; ++d0)
      for (int64_t d1 = 0; d1 < dims[1]; ++d1)
        for (int64_t d2 = 0; d2 < dims[2]; ++d2) {
          int64_t ia = d0 * stride_a[0] + d1 * stride_a[1] + d2 * stride_a[2];
          int64_t ib = d0 * stride_b[0] + d1 * stride_b[1] + d2 * stride_b[2];
          for (int64_t d3 = 0; d3 < dims[3]; ++d3, ++i, ia += stride_a[3], ib += stride_b[3]) f(i, ia, ib);
        }
  }
};

}  // namespace ag
