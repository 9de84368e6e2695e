// What the Linear-shaped ops share (linear in ops_matmul.cpp, gelu_linear in ops_linear_fused.cpp): the
// checks of their operands, the output's starting value (residual + bias) that the GEMM then adds x W^T
// to, and the gradients of the bias and the residual. Internal to autograd/.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/tensor.h"
#include "autograd/threads.h"

namespace ag::detail {

// The output shape of op(x, weight, bias): x (..., in), weight (out, in), bias (out) or undefined.
// Throws naming `op` otherwise.
template <typename T>
Shape linear_output_shape(const char* op, const Tensor<T>& x, const Tensor<T>& weight,
                          const Tensor<T>& bias) {
  const std::string name(op);
  if (!x.defined() || !weight.defined()) throw std::invalid_argument(name + ": x and weight must be defined");
  if (x.dim() < 1 || weight.dim() != 2 || x.size(-1) != weight.size(1))
    throw std::invalid_argument(name + ": shapes " + shape_str(x.shape()) + " and " +
                                shape_str(weight.shape()) + ": expected x (..., in) and weight (out, in)");
  const int64_t out_features = weight.size(0);
  if (bias.defined() && bias.shape() != Shape{out_features})
    throw std::invalid_argument(name + ": shapes " + shape_str(weight.shape()) + " and " +
                                shape_str(bias.shape()) + ": bias must be (out)");
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  return out_shape;
}

// Each row of y (rows x cols) = bias, if there is one. Returns whether it wrote y: if not, the GEMM
// assigns instead of adding.
template <typename T>
bool start_linear_output(T* y, int64_t rows, int64_t cols, const T* bias) {
  if (!bias) return false;
  parallel_for(rows, rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::copy(bias, bias + cols, y + r * cols);
  });
  return true;
}

// dbias (+)= the column sums of dy (rows x cols). Each thread sums whole columns, row by row, so the
// order (and the bits) never depend on the split.
template <typename T>
void put_bias_grad(Node<T>& bias, const T* dy, int64_t rows, int64_t cols) {
  const Grad<T> dbias(bias, GradWrites::kSum);
  if (!dbias) return;
  constexpr int64_t kColumns = 16;
  parallel_for((cols + kColumns - 1) / kColumns, rows * cols, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kColumns, c1 = std::min(cols, b1 * kColumns);
    for (int64_t r = 0; r < rows; ++r) dbias.put(c0, c1 - c0, ConstVecMap<T>(dy + r * cols + c0, c1 - c0));
  });
}

}  // namespace ag::detail
