// Matrix products: matmul (2-d, batched over equal leading dims, or N-d x 2-d as one flattened GEMM)
// and linear (x W^T + b, PyTorch's layout, without materialising W^T). Every product is one ag::gemm
// over views of the contiguous buffers: transposes are strides, never copies.
#include <algorithm>
#include <stdexcept>

#include "autograd/gemm.h"
#include "autograd/linear_parts.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

namespace {

std::string two_shapes(const char* op, const Shape& a, const Shape& b) {
  return std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b);
}

}  // namespace

template <typename T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.dim() < 2 || b.dim() < 2)
    throw std::invalid_argument(two_shapes("matmul", a.shape(), b.shape()) + ": both need >= 2 dims");
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K)
    throw std::invalid_argument(two_shapes("matmul", a.shape(), b.shape()) + ": inner dims " +
                                std::to_string(K) + " and " + std::to_string(b.size(-2)) + " differ");
  Shape out_shape = a.shape();
  out_shape.back() = N;

  if (b.dim() == 2) {
    // (..., M, K) x (K, N): all rows of a in one GEMM.
    const int64_t R = a.numel() / K;
    Tensor<T> out = Tensor<T>::empty(out_shape);
    gemm(R, N, K, row_major(a.data(), K), row_major(b.data(), N), out.data(), N, false);
    if (needs_grad<T>({&a, &b}))
      attach(out, "matmul", {a.node_ptr(), b.node_ptr()}, [R, K, N](Node<T>& n) {
        Node<T>& na = *n.inputs[0];
        Node<T>& nb = *n.inputs[1];
        const MatView<T> dout = row_major(n.grad.data(), N);
        // C = A B  =>  dA = dC B^T,  dB = A^T dC
        if (const detail::Grad<T> da(na); da)
          gemm(R, K, N, dout, row_major(nb.value.data(), N).transposed(), da.data(), K, da.adds());
        if (const detail::Grad<T> db(nb); db)
          gemm(K, N, R, row_major(na.value.data(), K).transposed(), dout, db.data(), N, db.adds());
      });
    return out;
  }

  if (Shape(a.shape().begin(), a.shape().end() - 2) != Shape(b.shape().begin(), b.shape().end() - 2))
    throw std::invalid_argument(two_shapes("matmul", a.shape(), b.shape()) + ": leading dims differ");
  const int64_t batches = a.numel() / (M * K);
  Tensor<T> out = Tensor<T>::empty(out_shape);
  const T* pa = a.data();
  const T* pb = b.data();
  T* po = out.data();
  // Independent GEMMs of a batch are spread over the threads, each whole on one thread: results do not
  // depend on the thread count.
  parallel_for(batches, 2 * M * N * K * batches, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i)
      gemm(M, N, K, row_major(pa + i * M * K, K), row_major(pb + i * K * N, N), po + i * M * N, N, false);
  });
  if (needs_grad<T>({&a, &b}))
    attach(out, "matmul", {a.node_ptr(), b.node_ptr()}, [batches, M, K, N](Node<T>& n) {
      Node<T>& na = *n.inputs[0];
      Node<T>& nb = *n.inputs[1];
      // Each batch entry writes its own slab of both gradients, da's before db's (a and b may be one node).
      const detail::Grad<T> da(na), db(nb);
      const T* dout = n.grad.data();
      parallel_for(batches, 4 * M * N * K * batches, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) {
          const MatView<T> douti = row_major(dout + i * M * N, N);
          if (da)
            gemm(M, K, N, douti, row_major(nb.value.data() + i * K * N, N).transposed(),
                 da.data() + i * M * K, K, da.adds());
          if (db)
            gemm(K, N, M, row_major(na.value.data() + i * M * K, K).transposed(), douti,
                 db.data() + i * K * N, N, db.adds());
        }
      });
    });
  return out;
}

// y = residual + x W^T + b, x (..., in), W (out, in), b (out) or undefined, residual (..., out) or undefined.
template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                 const Tensor<T>& residual) {
  const Shape out_shape = detail::linear_output_shape("linear", x, weight, bias, residual);
  const int64_t in = weight.size(1), out_features = weight.size(0), R = x.numel() / in;
  const bool has_bias = bias.defined(), has_residual = residual.defined();
  Tensor<T> out = Tensor<T>::empty(out_shape);
  // Every row starts as residual + bias; the GEMM adds x W^T to it.
  gemm(R, out_features, in, row_major(x.data(), in), row_major(weight.data(), in).transposed(), out.data(),
       out_features, detail::linear_start(bias, residual, out_features));

  if (!detail::linear_needs_grad(x, weight, bias, residual)) return out;
  attach(out, "linear", detail::linear_inputs(x, weight, bias, residual),
         [R, in, out_features, has_bias, has_residual](Node<T>& n) {
           Node<T>& nx = *n.inputs[0];
           Node<T>& nw = *n.inputs[1];
           const T* dy = n.grad.data();
           // y = r + x W^T + b  =>  dx = dy W,  dweight = dy^T x,  dbias = sum over rows of dy,  dr = dy
           if (const detail::Grad<T> dx(nx); dx)
             gemm(R, in, out_features, row_major(dy, out_features), row_major(nw.value.data(), in), dx.data(),
                  in, dx.adds());
           if (const detail::Grad<T> dweight(nw); dweight)
             gemm(out_features, in, R, row_major(dy, out_features).transposed(),
                  row_major(nx.value.data(), in), dweight.data(), in, dweight.adds());
           detail::put_bias_and_residual_grads(n, has_bias, has_residual, dy, R, out_features);
         });
  return out;
}

template Tensor<float> matmul<float>(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> matmul<double>(const Tensor<double>&, const Tensor<double>&);
template Tensor<float> linear<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                     const Tensor<float>&);
template Tensor<double> linear<double>(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&,
                                       const Tensor<double>&);

}  // namespace ag
