// gelu_linear: linear(gelu(h), W, b) (+ a residual) as one op that never stores gelu(h). Forward computes
// gelu(h) a block of rows at a time into a scratch buffer and multiplies each block by W^T; backward
// recomputes it the same way for dW = dy^T gelu(h), and takes dh = (dy W) * gelu'(h) from the same tanh. So
// the graph keeps only h (the input, alive anyway as fc1's output) where linear(gelu(h)) kept gelu(h) too: a
// (rows, d_ff) tensor per MLP, the largest activation of a transformer block.
#include <algorithm>

#include "autograd/gelu.h"
#include "autograd/gemm.h"
#include "autograd/linear_parts.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

namespace {

// Rows of h per block: a multiple of the GEMM's slice depth, so dW summed block by block has the bits of
// one product over all rows (gemm.h), and 512 x d_ff floats of scratch (4 MB at d_ff 2048) instead of the
// whole (rows, d_ff) tensor.
constexpr int64_t kBlockRows = kGemmSliceDepth;
// Elements per Eigen pass (its tanh scratch stays on the stack), and the rough cost of one element.
constexpr int64_t kChunk = 2048;
constexpr int64_t kWorkPerElement = 8;
template <typename T>
using Scratch = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kChunk, 1>;

}  // namespace

template <typename T>
Tensor<T> gelu_linear(const Tensor<T>& h, const Tensor<T>& weight, const Tensor<T>& bias,
                      const Tensor<T>& residual) {
  const Shape out_shape = detail::linear_output_shape("gelu_linear", h, weight, bias, residual);
  const int64_t in = weight.size(1), out_features = weight.size(0), R = h.numel() / in;
  const bool has_bias = bias.defined(), has_residual = residual.defined();
  Tensor<T> out = Tensor<T>::empty(out_shape);
  const bool started =
      detail::start_linear_output(out.data(), R, out_features, has_bias ? bias.data() : nullptr,
                                  has_residual ? residual.data() : nullptr);
  const T* hp = h.data();
  const T* wp = weight.data();
  T* yp = out.data();
  Buffer<T> g(static_cast<size_t>(std::min(R, kBlockRows) * in));
  for (int64_t r0 = 0; r0 < R; r0 += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, R - r0);
    const T* hb = hp + r0 * in;
    parallel_chunks(rows * in, kChunk, kWorkPerElement, [&](int64_t i, int64_t len) {
      ConstVecMap<T> x(hb + i, len);
      VecMap<T>(g.data() + i, len) = detail::gelu_value(x, detail::gelu_tanh(x));
    });
    gemm(rows, out_features, in, row_major(g.data(), in), row_major(wp, in).transposed(),
         yp + r0 * out_features, out_features, started);
  }

  if (!detail::linear_needs_grad(h, weight, bias, residual)) return out;
  attach(out, "gelu_linear", detail::linear_inputs(h, weight, bias, residual),
         [R, in, out_features, has_bias, has_residual](Node<T>& n) {
           Node<T>& nh = *n.inputs[0];
           Node<T>& nw = *n.inputs[1];
           const T* dy = n.grad.data();
           const T* hp = nh.value.data();
           // y = r + g W^T + b with g = gelu(h)  =>  dh = (dy W) * gelu'(h),  dweight = dy^T g,
           // dbias = sum of dy rows,  dr = dy.
           // Block by block: dy W into dh's rows (or a scratch block when dh already holds a gradient to add
           // to), then one pass that recomputes g and turns dy W into dh, then the block's share of dweight.
           // (h and W as one node, absurd as it is, would need dh whole before dweight adds to it: one
           // block.)
           const detail::Grad<T> dh(nh);
           const detail::Grad<T> dweight(nw);
           const int64_t block = &nh == &nw ? R : kBlockRows, block_rows = std::min(R, block);
           Buffer<T> g(dweight ? static_cast<size_t>(block_rows * in) : 0);
           Buffer<T> dg(dh && dh.adds() ? static_cast<size_t>(block_rows * in) : 0);
           for (int64_t r0 = 0; r0 < R && (dh || dweight); r0 += block) {
             const int64_t rows = std::min(block, R - r0);
             const T* dyb = dy + r0 * out_features;
             const T* hb = hp + r0 * in;
             T* dgb = dh ? (dh.adds() ? dg.data() : dh.data() + r0 * in) : nullptr;
             if (dh)
               gemm(rows, in, out_features, row_major(dyb, out_features), row_major(nw.value.data(), in), dgb,
                    in, false);
             parallel_chunks(rows * in, kChunk, kWorkPerElement, [&](int64_t i, int64_t len) {
               ConstVecMap<T> x(hb + i, len);
               const Scratch<T> t = detail::gelu_tanh(x);
               if (dweight) VecMap<T>(g.data() + i, len) = detail::gelu_value(x, t);
               if (dh) dh.put(r0 * in + i, len, detail::gelu_backward(ConstVecMap<T>(dgb + i, len), x, t));
             });
             if (dweight)
               gemm(out_features, in, rows, row_major(dyb, out_features).transposed(),
                    row_major(g.data(), in), dweight.data(), in, dweight.adds() || r0 > 0);
           }
           detail::put_bias_and_residual_grads(n, has_bias, has_residual, dy, R, out_features);
         });
  return out;
}

template Tensor<float> gelu_linear<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                          const Tensor<float>&);
template Tensor<double> gelu_linear<double>(const Tensor<double>&, const Tensor<double>&,
                                            const Tensor<double>&, const Tensor<double>&);

}  // namespace ag
