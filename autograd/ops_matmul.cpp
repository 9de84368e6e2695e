// Matrix products: matmul (2-d, batched over equal leading dims, or N-d x 2-d as one flattened GEMM)
// and linear (x W^T + b, PyTorch's layout, without materialising W^T). Every product is an Eigen GEMM
// over maps of the contiguous buffers; noalias() keeps Eigen from allocating a temporary.
#include <algorithm>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

namespace {

std::string two_shapes(const char* op, const Shape& a, const Shape& b) {
  return std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b);
}

// Below this many flops a GEMM runs whole on the calling thread (about 10 microseconds of work).
constexpr int64_t kGemmParallelFlops = int64_t(1) << 21;
// Output rows are split in multiples of this, so each thread's block keeps Eigen's register tiles full.
constexpr int64_t kRowGrain = 16;

// c = a * b (or c += a * b), rows x cols = (rows x inner) (inner x cols), a and b any Eigen matrix
// expressions Eigen's GEMM reads directly (maps, their transposes). Large products are split into blocks
// of output rows, one per thread: the split depends only on the shape and the thread count, so results
// are deterministic for a fixed thread count, and no thread waits on another inside Eigen.
template <typename T, typename A, typename B>
void gemm(T* c, int64_t rows, int64_t cols, const A& a, const B& b, bool accumulate) {
  const int64_t inner = a.cols();
  const int64_t blocks = (rows + kRowGrain - 1) / kRowGrain;
  const bool large = 2 * rows * cols * inner >= kGemmParallelFlops;
  parallel_for(blocks, large ? kParallelMinWork : 0, [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * kRowGrain, r1 = std::min(rows, b1 * kRowGrain);
    MatMap<T> cm(c + r0 * cols, r1 - r0, cols);
    if (accumulate)
      cm.noalias() += a.middleRows(r0, r1 - r0) * b;
    else
      cm.noalias() = a.middleRows(r0, r1 - r0) * b;
  });
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
    gemm(out.data(), R, N, ConstMatMap<T>(a.data(), R, K), ConstMatMap<T>(b.data(), K, N), false);
    if (needs_grad<T>({&a, &b}))
      attach(out, "matmul", {a.node_ptr(), b.node_ptr()}, [R, K, N](Node<T>& n) {
        Node<T>& na = *n.inputs[0];
        Node<T>& nb = *n.inputs[1];
        ConstMatMap<T> g(n.grad.data(), R, N);
        // C = A B  =>  dA = dC B^T,  dB = A^T dC
        if (na.requires_grad)
          gemm(na.grad_buffer(), R, K, g, ConstMatMap<T>(nb.value.data(), K, N).transpose(), true);
        if (nb.requires_grad)
          gemm(nb.grad_buffer(), K, N, ConstMatMap<T>(na.value.data(), R, K).transpose(), g, true);
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
      MatMap<T>(po + i * M * N, M, N).noalias() =
          ConstMatMap<T>(pa + i * M * K, M, K) * ConstMatMap<T>(pb + i * K * N, K, N);
  });
  if (needs_grad<T>({&a, &b}))
    attach(out, "matmul", {a.node_ptr(), b.node_ptr()}, [batches, M, K, N](Node<T>& n) {
      Node<T>& na = *n.inputs[0];
      Node<T>& nb = *n.inputs[1];
      T* ga = na.requires_grad ? na.grad_buffer() : nullptr;
      T* gb = nb.requires_grad ? nb.grad_buffer() : nullptr;
      const T* g = n.grad.data();
      parallel_for(batches, 4 * M * N * K * batches, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) {
          ConstMatMap<T> gi(g + i * M * N, M, N);
          if (ga)
            MatMap<T>(ga + i * M * K, M, K).noalias() +=
                gi * ConstMatMap<T>(nb.value.data() + i * K * N, K, N).transpose();
          if (gb)
            MatMap<T>(gb + i * K * N, K, N).noalias() +=
                ConstMatMap<T>(na.value.data() + i * M * K, M, K).transpose() * gi;
        }
      });
    });
  return out;
}

// y = x W^T + b, x (..., in), W (out, in), b (out) or undefined.
template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias) {
  if (x.dim() < 1 || weight.dim() != 2 || x.size(-1) != weight.size(1))
    throw std::invalid_argument(two_shapes("linear", x.shape(), weight.shape()) +
                                ": expected x (..., in) and weight (out, in)");
  const int64_t in = weight.size(1), out_features = weight.size(0), R = x.numel() / in;
  const bool has_bias = bias.defined();
  if (has_bias && bias.shape() != Shape{out_features})
    throw std::invalid_argument(two_shapes("linear", weight.shape(), bias.shape()) + ": bias must be (out)");
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor<T> out = Tensor<T>::empty(out_shape);
  MatMap<T> y(out.data(), R, out_features);
  if (has_bias) {
    y.rowwise() = ConstRowMap<T>(bias.data(), out_features);
    gemm(out.data(), R, out_features, ConstMatMap<T>(x.data(), R, in),
         ConstMatMap<T>(weight.data(), out_features, in).transpose(), true);
  } else {
    gemm(out.data(), R, out_features, ConstMatMap<T>(x.data(), R, in),
         ConstMatMap<T>(weight.data(), out_features, in).transpose(), false);
  }

  const bool record = has_bias ? needs_grad<T>({&x, &weight, &bias}) : needs_grad<T>({&x, &weight});
  if (!record) return out;
  std::vector<std::shared_ptr<Node<T>>> inputs{x.node_ptr(), weight.node_ptr()};
  if (has_bias) inputs.push_back(bias.node_ptr());
  attach(out, "linear", std::move(inputs), [R, in, out_features](Node<T>& n) {
    Node<T>& nx = *n.inputs[0];
    Node<T>& nw = *n.inputs[1];
    ConstMatMap<T> g(n.grad.data(), R, out_features);
    // y = x W^T + b  =>  dx = dy W,  dW = dy^T x,  db = sum over rows of dy
    if (nx.requires_grad) {
      bool fresh = false;  // a fresh buffer is written by the GEMM (=), not zero-filled first and added to
      T* dx = nx.grad_buffer_for_write(fresh);
      gemm(dx, R, in, g, ConstMatMap<T>(nw.value.data(), out_features, in), !fresh);
    }
    if (nw.requires_grad)
      gemm(nw.grad_buffer(), out_features, in, g.transpose(), ConstMatMap<T>(nx.value.data(), R, in), true);
    if (n.inputs.size() == 3 && n.inputs[2]->requires_grad)
      MatMap<T>(n.inputs[2]->grad_buffer(), 1, out_features) += g.colwise().sum();
  });
  return out;
}

template Tensor<float> matmul<float>(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> matmul<double>(const Tensor<double>&, const Tensor<double>&);
template Tensor<float> linear<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&);
template Tensor<double> linear<double>(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&);

}  // namespace ag
