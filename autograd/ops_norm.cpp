// Layer normalisation over the last dim, as torch.nn.functional.layer_norm with weight and bias of shape
// [D] and the biased variance. The backward is fused: one pass per row for x, one accumulation for the
// affine parameters, from the per-row mean and 1/std saved by forward.
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

template <typename T>
Tensor<T> layer_norm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, T eps) {
  if (!x.defined() || !weight.defined() || !bias.defined())
    throw std::invalid_argument("layer_norm: x, weight and bias must all be defined");
  if (x.dim() == 0 || x.shape().back() == 0)
    throw std::invalid_argument("layer_norm: x of shape " + shape_str(x.shape()) +
                                " has no last dim to normalise");
  const int64_t cols = x.shape().back();
  const int64_t rows = x.numel() / cols;
  if (weight.shape() != Shape{cols} || bias.shape() != Shape{cols})
    throw std::invalid_argument("layer_norm: x of shape " + shape_str(x.shape()) +
                                " needs weight and bias of shape " + shape_str({cols}) + ", got weight " +
                                shape_str(weight.shape()) + " and bias " + shape_str(bias.shape()));
  if (!(eps > T(0)))
    throw std::invalid_argument("layer_norm: eps must be positive, got " + std::to_string(eps));

  Tensor<T> out = Tensor<T>::empty(x.shape());
  std::vector<T> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  const T* xp = x.data();
  T* yp = out.data();
  ConstVecMap<T> w = weight.vec(), b = bias.vec();
  parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      ConstVecMap<T> xr(xp + r * cols, cols);
      VecMap<T> yr(yp + r * cols, cols);
      // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels badly in float.
      const T mu = xr.mean();
      const T var = (xr - mu).square().mean();
      const T rs = T(1) / std::sqrt(var + eps);
      mean[r] = mu;
      rstd[r] = rs;
      yr = (xr - mu) * rs * w + b;
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
             const T inv_cols = T(1) / static_cast<T>(cols);
             if (const detail::Grad<T> dx(xn); dx) {
               ConstVecMap<T> w(wn.value.data(), cols);
               // With xhat = (x - mean) * rstd and g = dy * w:
               // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
               parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   ConstVecMap<T> xr(xp + r * cols, cols), dyr(dy + r * cols, cols);
                   const T mu = mean[r], rs = rstd[r];
                   const T g_mean = (dyr * w).sum() * inv_cols;
                   const T gx_mean = (dyr * w * (xr - mu)).sum() * rs * inv_cols;
                   dx.put(r * cols, cols, rs * (dyr * w - g_mean - (xr - mu) * rs * gx_mean));
                 }
               });
             }
             // Serial over rows so the parameter gradients sum in a fixed order (deterministic across thread
             // counts); this pass is a small fraction of the cost.
             const detail::Grad<T> dweight(wn, detail::GradWrites::kSum), dbias(bn, detail::GradWrites::kSum);
             if (dweight || dbias)
               for (int64_t r = 0; r < rows; ++r) {
                 ConstVecMap<T> dyr(dy + r * cols, cols);
                 if (dweight)
                   dweight.put(0, cols, dyr * (ConstVecMap<T>(xp + r * cols, cols) - mean[r]) * rstd[r]);
                 if (dbias) dbias.put(0, cols, dyr);
               }
           });
  return out;
}

template Tensor<float> layer_norm<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                         float);
template Tensor<double> layer_norm<double>(const Tensor<double>&, const Tensor<double>&,
                                           const Tensor<double>&, double);

}  // namespace ag
