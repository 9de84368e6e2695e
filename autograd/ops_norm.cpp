// Layer normalisation over the last dim, as torch.nn.functional.layer_norm with weight and bias of shape
// [D] and the biased variance. The backward is fused: one pass per row for x, one accumulation for the
// affine parameters, from the per-row mean and 1/std saved by forward.
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

template Tensor<float> layer_norm<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                         float);
template Tensor<double> layer_norm<double>(const Tensor<double>&, const Tensor<double>&,
                                           const Tensor<double>&, double);

}  // namespace ag
