// Layer normalisation over the last dim, as torch.nn.functional.layer_norm with weight and bias of shape
// [D] and the biased variance, and RMS normalisation, as torch.nn.functional.rms_norm with a weight of shape
// [D]. Each backward is fused: one pass per row for x, one accumulation for the weight (and bias), from the
// per-row statistics saved by forward.
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/layer_norm_rows.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

template <typename T>
Tensor<T> layer_norm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, T eps) {
  detail::check_layer_norm_args("layer_norm", x, weight, bias, eps);
  const int64_t cols = x.shape().back();
  const int64_t rows = x.numel() / cols;

  Tensor<T> out = Tensor<T>::empty(x.shape());
  std::vector<T> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  const T* xp = x.data();
  T* yp = out.data();
  ConstVecMap<T> w = weight.vec(), b = bias.vec();
  parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const ConstVecMap<T> xr(xp + r * cols, cols);
      detail::layer_norm_stats(xr, eps, mean[r], rstd[r]);
      detail::layer_norm_row(xr, mean[r], rstd[r], w, b, VecMap<T>(yp + r * cols, cols));
    }
  });

  if (needs_grad<T>({&x, &weight, &bias}))
    attach(out, "layer_norm", {x.node_ptr(), weight.node_ptr(), bias.node_ptr()},
           [rows, cols, mean = std::move(mean), rstd = std::move(rstd)](Node<T>& n) {
             Node<T>& xn = *n.inputs[0];
             Node<T>& wn = *n.inputs[1];
             Node<T>& bn = *n.inputs[2];
             const T* xp = xn.value.data();
             const T* dy = n.grad.data();
             if (const detail::Grad<T> dx(xn); dx) {
               ConstVecMap<T> w(wn.value.data(), cols);
               parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   detail::layer_norm_row_backward(ConstVecMap<T>(xp + r * cols, cols),
                                                   ConstVecMap<T>(dy + r * cols, cols), w, mean[r], rstd[r],
                                                   [&](const auto& e) { dx.put(r * cols, cols, e); });
               });
             }
             const detail::Grad<T> dweight(wn, detail::GradWrites::kSum), dbias(bn, detail::GradWrites::kSum);
             detail::put_layer_norm_param_grads(dweight, dbias, rows, cols, dy, xp, mean.data(), rstd.data());
           });
  return out;
}

// y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps) per row; with g = dy * w,
// dx = rstd * (g - x * rstd^2 * mean(g * x)) and dw = the column sums of dy * x * rstd.
template <typename T>
Tensor<T> rms_norm(const Tensor<T>& x, const Tensor<T>& weight, T eps) {
  if (!x.defined() || !weight.defined())
    throw std::invalid_argument("rms_norm: x and weight must be defined");
  if (x.dim() == 0 || x.shape().back() == 0)
    throw std::invalid_argument("rms_norm: x of shape " + shape_str(x.shape()) +
                                " has no last dim to normalise");
  const int64_t cols = x.shape().back();
  const int64_t rows = x.numel() / cols;
  if (weight.shape() != Shape{cols})
    throw std::invalid_argument("rms_norm: x of shape " + shape_str(x.shape()) + " needs weight of shape " +
                                shape_str({cols}) + ", got " + shape_str(weight.shape()));
  if (!(eps > T(0)))
    throw std::invalid_argument("rms_norm: eps must be positive, got " + std::to_string(eps));

  Tensor<T> out = Tensor<T>::empty(x.shape());
  std::vector<T> rstd(static_cast<size_t>(rows));
  const T* xp = x.data();
  T* yp = out.data();
  ConstVecMap<T> w = weight.vec();
  parallel_for(rows, 3 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const ConstVecMap<T> xr(xp + r * cols, cols);
      rstd[r] = T(1) / std::sqrt(xr.square().mean() + eps);
      VecMap<T>(yp + r * cols, cols) = xr * rstd[r] * w;
    }
  });

  if (needs_grad<T>({&x, &weight}))
    attach(out, "rms_norm", {x.node_ptr(), weight.node_ptr()},
           [rows, cols, rstd = std::move(rstd)](Node<T>& n) {
             Node<T>& xn = *n.inputs[0];
             Node<T>& wn = *n.inputs[1];
             const T* xp = xn.value.data();
             const T* dy = n.grad.data();
             if (const detail::Grad<T> dx(xn); dx) {
               const ConstVecMap<T> w(wn.value.data(), cols);
               parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const ConstVecMap<T> xr(xp + r * cols, cols), dyr(dy + r * cols, cols);
                   const T gx_mean = (dyr * w * xr).mean();
                   dx.put(r * cols, cols, rstd[r] * (dyr * w - xr * (rstd[r] * rstd[r] * gx_mean)));
                 }
               });
             }
             if (const detail::Grad<T> dw(wn, detail::GradWrites::kSum); dw) {
               std::vector<T> sums(static_cast<size_t>(cols), T(0));
               VecMap<T> s(sums.data(), cols);
               for (int64_t r = 0; r < rows; ++r)
                 s += ConstVecMap<T>(dy + r * cols, cols) * ConstVecMap<T>(xp + r * cols, cols) * rstd[r];
               dw.put(0, cols, ConstVecMap<T>(sums.data(), cols));
             }
           });
  return out;
}

template Tensor<float> rms_norm<float>(const Tensor<float>&, const Tensor<float>&, float);
template Tensor<double> rms_norm<double>(const Tensor<double>&, const Tensor<double>&, double);
template Tensor<float> layer_norm<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                         float);
template Tensor<double> layer_norm<double>(const Tensor<double>&, const Tensor<double>&,
                                           const Tensor<double>&, double);

}  // namespace ag
