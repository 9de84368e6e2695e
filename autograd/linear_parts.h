// What the Linear-shaped ops share (linear in ops_matmul.cpp, gelu_linear in ops_linear_fused.cpp): the
// checks of their operands, the output's starting value (residual + bias) that the GEMM then adds x W^T
// to, and the gradients of the bias and the residual. Internal to autograd/.
#pragma once

#include <stdexcept>
#include <string>

#include "autograd/gemm.h"
#include "autograd/row_block_sums.h"
#include "autograd/tensor.h"
#include "autograd/threads.h"

namespace ag::detail {

// The output shape of op(x, weight, bias, residual): x (..., in), weight (out, in), bias (out) or
// undefined, residual x's shape with `out` as its last dim, or undefined. Throws naming `op` otherwise.
template <typename T>
Shape linear_output_shape(const char* op, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                          const Tensor<T>& residual) {
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
  if (residual.defined() && residual.shape() != out_shape)
    throw std::invalid_argument(name + ": residual of shape " + shape_str(residual.shape()) +
                                " does not match the output's " + shape_str(out_shape));
  return out_shape;
}

// What the output's rows start from before the GEMM adds x W^T: residual row + bias, either may be
// undefined (gemm.h: CStart). `cols` is the number of output features.
template <typename T>
CStart<T> linear_start(const Tensor<T>& bias, const Tensor<T>& residual, int64_t cols) {
  return {bias.defined() ? bias.data() : nullptr, residual.defined() ? residual.data() : nullptr, cols};
}

// dbias (+)= the column sums of dy (rows x cols), in blocks of rows (row_block_sums.h).
template <typename T>
void put_bias_grad(Node<T>& bias, const T* dy, int64_t rows, int64_t cols) {
  const Grad<T> dbias(bias, GradWrites::kSum);
  if (!dbias) return;
  sum_row_blocks<T>(
      rows, cols, 1, 1,
      [&](int64_t r, T* sum) { VecMap<T>(sum, cols) += ConstVecMap<T>(dy + r * cols, cols); },
      [&](const T* sum) { dbias.put(0, cols, ConstVecMap<T>(sum, cols)); });
}

// The residual's gradient is dy itself.
template <typename T>
void put_residual_grad(Node<T>& residual, const T* dy, int64_t size) {
  const Grad<T> dresidual(residual);
  if (!dresidual) return;
  constexpr int64_t kChunk = 4096;
  parallel_chunks(size, kChunk, 1,
                  [&](int64_t i, int64_t len) { dresidual.put(i, len, ConstVecMap<T>(dy + i, len)); });
}

// Whether op(x, weight, bias, residual) records a graph edge, and its inputs in the order the backward
// reads them: x, weight, then the bias and the residual where defined.
template <typename T>
bool linear_needs_grad(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                       const Tensor<T>& residual) {
  return needs_grad<T>({&x, &weight}) || (bias.defined() && needs_grad<T>({&bias})) ||
         (residual.defined() && needs_grad<T>({&residual}));
}
template <typename T>
std::vector<std::shared_ptr<Node<T>>> linear_inputs(const Tensor<T>& x, const Tensor<T>& weight,
                                                    const Tensor<T>& bias, const Tensor<T>& residual) {
  std::vector<std::shared_ptr<Node<T>>> inputs{x.node_ptr(), weight.node_ptr()};
  if (bias.defined()) inputs.push_back(bias.node_ptr());
  if (residual.defined()) inputs.push_back(residual.node_ptr());
  return inputs;
}

// The gradients of the bias and the residual from dy (rows x cols), for a backward whose node's inputs
// are linear_inputs(...).
template <typename T>
void put_bias_and_residual_grads(Node<T>& n, bool has_bias, bool has_residual, const T* dy, int64_t rows,
                                 int64_t cols) {
  if (has_bias) put_bias_grad(*n.inputs[2], dy, rows, cols);
  if (has_residual) put_residual_grad(*n.inputs[has_bias ? 3 : 2], dy, rows * cols);
}

}  // namespace ag::detail
