// Linear ops fused with the elementwise function before them, so that function's output is never stored.
//
// gelu_linear: linear(gelu(h), W, b) (+ a residual) as one op that never stores gelu(h). Forward computes
// gelu(h) a block of rows at a time into a scratch buffer and multiplies each block by W^T; backward
// recomputes it the same way for dW = dy^T gelu(h), and takes dh = (dy W) * gelu'(h) from the same tanh. So
// the graph keeps only h (the input, alive anyway as fc1's output) where linear(gelu(h)) kept gelu(h) too: a
// (rows, d_ff) tensor per MLP, the largest activation of a transformer block.
//
// layer_norm_linear: linear(layer_norm(x), W, b), keeping x and each row's mean and 1/std where the
// composed ops kept LN(x) too; LN(x) is recomputed the same way.
#include <algorithm>

#include "autograd/gelu.h"
#include "autograd/gemm.h"
#include "autograd/layer_norm_rows.h"
#include "autograd/linear_parts.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

namespace {

// Rows per block: a multiple of the GEMM's slice depth, so dW summed block by block has the bits of one
// product over all rows (gemm.h), and as many of them as fit in kBlockBytes of scratch (at least one), so
// a small model runs its products whole (each block costs a wake-up of the threads) while medium's MLP
// (d_ff 2048) takes 512 rows at a time: 4 MB of scratch instead of its whole (rows, d_ff) tensor.
constexpr int64_t kBlockBytes = int64_t(4) << 20;
template <typename T>
int64_t block_rows(int64_t cols) {
  const int64_t slice_bytes = kGemmSliceDepth * cols * static_cast<int64_t>(sizeof(T));
  return kGemmSliceDepth * std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(1, slice_bytes));
}

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
  const CStart<T> start = detail::linear_start(bias, residual, out_features);
  const T* hp = h.data();
  const T* wp = weight.data();
  T* yp = out.data();
  const int64_t block = block_rows<T>(in);
  Buffer<T> g(static_cast<size_t>(std::min(R, block) * in));
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t rows = std::min(block, R - r0);
    const T* hb = hp + r0 * in;
    parallel_chunks(rows * in, kChunk, kWorkPerElement, [&](int64_t i, int64_t len) {
      ConstVecMap<T> x(hb + i, len);
      VecMap<T>(g.data() + i, len) = detail::gelu_value(x, detail::gelu_tanh(x));
    });
    gemm(rows, out_features, in, row_major(g.data(), in), row_major(wp, in).transposed(),
         yp + r0 * out_features, out_features, start.at(r0, 0));
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
           const int64_t block = &nh == &nw ? R : block_rows<T>(in), rows_max = std::min(R, block);
           Buffer<T> g(dweight ? static_cast<size_t>(rows_max * in) : 0);
           Buffer<T> dg(dh && dh.adds() ? static_cast<size_t>(rows_max * in) : 0);
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

// y = LN(x) W^T + b with LN(x) = (x - mean) * rstd * ln_weight + ln_bias per row: as linear(layer_norm(x)),
// with LN(x) computed a block of rows at a time in forward and again in backward from the saved mean and
// rstd, so the graph keeps x (the residual stream, alive anyway) instead of LN(x).
template <typename T>
Tensor<T> layer_norm_linear(const Tensor<T>& x, const Tensor<T>& ln_weight, const Tensor<T>& ln_bias,
                            const Tensor<T>& weight, const Tensor<T>& bias, T eps) {
  detail::check_layer_norm_args("layer_norm_linear", x, ln_weight, ln_bias, eps);
  const Shape out_shape = detail::linear_output_shape("layer_norm_linear", x, weight, bias, Tensor<T>());
  const int64_t in = weight.size(1), out_features = weight.size(0), R = x.numel() / in;
  const bool has_bias = bias.defined();
  Tensor<T> out = Tensor<T>::empty(out_shape);
  const CStart<T> start = detail::linear_start(bias, Tensor<T>(), out_features);
  std::vector<T> mean(static_cast<size_t>(R)), rstd(static_cast<size_t>(R));
  const T* xp = x.data();
  ConstVecMap<T> lw = ln_weight.vec(), lb = ln_bias.vec();
  const int64_t block = block_rows<T>(in);
  Buffer<T> z(static_cast<size_t>(std::min(R, block) * in));
  for (int64_t r0 = 0; r0 < R; r0 += block) {
    const int64_t rows = std::min(block, R - r0);
    parallel_for(rows, 4 * rows * in, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = r0 + i;
        const ConstVecMap<T> xr(xp + r * in, in);
        detail::layer_norm_stats(xr, eps, mean[r], rstd[r]);
        detail::layer_norm_row(xr, mean[r], rstd[r], lw, lb, VecMap<T>(z.data() + i * in, in));
      }
    });
    gemm(rows, out_features, in, row_major(z.data(), in), row_major(weight.data(), in).transposed(),
         out.data() + r0 * out_features, out_features, start.at(r0, 0));
  }

  if (!needs_grad<T>({&x, &ln_weight, &ln_bias}) && !detail::linear_needs_grad(x, weight, bias, Tensor<T>()))
    return out;
  std::vector<std::shared_ptr<Node<T>>> inputs{x.node_ptr(), ln_weight.node_ptr(), ln_bias.node_ptr(),
                                               weight.node_ptr()};
  if (has_bias) inputs.push_back(bias.node_ptr());
  attach(out, "layer_norm_linear", std::move(inputs),
         [R, in, out_features, mean = std::move(mean), rstd = std::move(rstd)](Node<T>& n) {
           Node<T>& nx = *n.inputs[0];
           Node<T>& nw = *n.inputs[3];
           const T* dy = n.grad.data();
           const T* xp = nx.value.data();
           const T* wp = nw.value.data();
           ConstVecMap<T> lw(n.inputs[1]->value.data(), in), lb(n.inputs[2]->value.data(), in);
           // With z = LN(x): dz = dy W, dweight = dy^T z, dbias = sum of dy rows, and dx, dln_weight,
           // dln_bias from dz as layer_norm's backward. Block by block: dz, then z recomputed for the block's
           // share of dweight, then the block's rows of dx, then its rows of the LayerNorm's parameter
           // gradients, summed row after row as layer_norm does. (x and W as one node would need dx whole
           // before dweight adds to it: one block.)
           const detail::Grad<T> dx(nx);
           const detail::Grad<T> dln_weight(*n.inputs[1], detail::GradWrites::kSum);
           const detail::Grad<T> dln_bias(*n.inputs[2], detail::GradWrites::kSum);
           const detail::Grad<T> dweight(nw);
           const bool need_dz = dx || dln_weight || dln_bias;
           const int64_t block = &nx == &nw ? R : block_rows<T>(in), rows_max = std::min(R, block);
           Buffer<T> z(dweight ? static_cast<size_t>(rows_max * in) : 0);
           Buffer<T> dz(need_dz ? static_cast<size_t>(rows_max * in) : 0);
           for (int64_t r0 = 0; r0 < R && (need_dz || dweight); r0 += block) {
             const int64_t rows = std::min(block, R - r0);
             const T* dyb = dy + r0 * out_features;
             if (need_dz)
               gemm(rows, in, out_features, row_major(dyb, out_features), row_major(wp, in), dz.data(), in,
                    false);
             if (dweight) {
               parallel_for(rows, 4 * rows * in, [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i)
                   detail::layer_norm_row(ConstVecMap<T>(xp + (r0 + i) * in, in), mean[r0 + i], rstd[r0 + i],
                                          lw, lb, VecMap<T>(z.data() + i * in, in));
               });
               gemm(out_features, in, rows, row_major(dyb, out_features).transposed(),
                    row_major(z.data(), in), dweight.data(), in, dweight.adds() || r0 > 0);
             }
             if (dx)
               parallel_for(rows, 4 * rows * in, [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i) {
                   const int64_t r = r0 + i;
                   detail::layer_norm_row_backward(ConstVecMap<T>(xp + r * in, in),
                                                   ConstVecMap<T>(dz.data() + i * in, in), lw, mean[r],
                                                   rstd[r], [&](const auto& e) { dx.put(r * in, in, e); });
                 }
               });
             detail::put_layer_norm_param_grads(dln_weight, dln_bias, rows, in, dz.data(), xp + r0 * in,
                                                mean.data() + r0, rstd.data() + r0);
           }
           if (n.inputs.size() > 4) detail::put_bias_grad(*n.inputs[4], dy, R, out_features);
         });
  return out;
}

template Tensor<float> gelu_linear<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                          const Tensor<float>&);
template Tensor<double> gelu_linear<double>(const Tensor<double>&, const Tensor<double>&,
                                            const Tensor<double>&, const Tensor<double>&);

template Tensor<float> layer_norm_linear<float>(const Tensor<float>&, const Tensor<float>&,
                                                const Tensor<float>&, const Tensor<float>&,
                                                const Tensor<float>&, float);
template Tensor<double> layer_norm_linear<double>(const Tensor<double>&, const Tensor<double>&,
                                                  const Tensor<double>&, const Tensor<double>&,
                                                  const Tensor<double>&, double);

}  // namespace ag
