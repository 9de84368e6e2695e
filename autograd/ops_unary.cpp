// Unary elementwise functions: exp, log, rsqrt, sqrt, pow with a scalar exponent, tanh, relu, GELU (tanh
// form) and SiLU, each forward with its backward. All of them are one Eigen array expression over the whole
// contiguous buffer, which Eigen vectorises.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/gelu.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

namespace {

// Backward runs over chunks of this many elements, so a backward that needs a scratch array (gelu) keeps
// it on the stack and in L1 instead of allocating (and page-faulting) one as large as the tensor.
constexpr int64_t kChunk = 2048;
// Rough cost of one element (transcendentals dominate), for deciding when to use the threads.
constexpr int64_t kWorkPerElement = 8;
template <typename T>
using Scratch = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kChunk, 1>;

// Shared shape of every op here: forward(x, y) fills the output y, and backward(x, y, dy, put) passes the
// input's gradient, as an expression, to put, chunk by chunk. Both write from inside the lambda, so no
// Eigen expression outlives the lambda (or the scratch array) that built it.
template <typename T, typename Forward, typename Backward>
Tensor<T> unary(const Tensor<T>& a, const char* op, Forward forward, Backward grad_fn) {
  if (!a.defined()) throw std::invalid_argument(std::string(op) + ": input tensor is undefined");
  Tensor<T> out = Tensor<T>::empty(a.shape());
  const int64_t size = a.numel();
  const T* x = a.data();
  T* y = out.data();
  parallel_chunks(size, kChunk, kWorkPerElement, [&](int64_t i, int64_t len) {
    VecMap<T> ys(y + i, len);
    forward(ConstVecMap<T>(x + i, len), ys);
  });
  if (needs_grad<T>({&a}))
    attach(out, op, {a.node_ptr()}, [grad_fn, size](Node<T>& n) {
      Node<T>& in = *n.inputs[0];
      const detail::Grad<T> dx(in);
      if (!dx) return;
      parallel_chunks(size, kChunk, kWorkPerElement, [&](int64_t i, int64_t len) {
        ConstVecMap<T> xs(in.value.data() + i, len), ys(n.value.data() + i, len), dys(n.grad.data() + i, len);
        grad_fn(xs, ys, dys, [&](const auto& dxs) { dx.put(i, len, dxs); });
      });
    });
  return out;
}

// Argument types of the forward and backward lambdas below (backward's last one, `put`, is generic).
template <typename T>
using In = const ConstVecMap<T>&;
template <typename T>
using Out = VecMap<T>&;

}  // namespace

template <typename T>
Tensor<T> exp(const Tensor<T>& a) {
  return unary(
      a, "exp", [](In<T> x, Out<T> y) { y = x.exp(); },
      [](In<T>, In<T> y, In<T> dy, auto&& put) { put(dy * y); });
}

template <typename T>
Tensor<T> log(const Tensor<T>& a) {
  return unary(
      a, "log", [](In<T> x, Out<T> y) { y = x.log(); },
      [](In<T> x, In<T>, In<T> dy, auto&& put) { put(dy / x); });
}

template <typename T>
Tensor<T> rsqrt(const Tensor<T>& a) {
  // y = x^(-1/2), dy/dx = -y^3 / 2 from the saved output.
  return unary(
      a, "rsqrt", [](In<T> x, Out<T> y) { y = x.rsqrt(); },
      [](In<T>, In<T> y, In<T> dy, auto&& put) { put(T(-0.5) * dy * y.cube()); });
}

template <typename T>
Tensor<T> sqrt(const Tensor<T>& a) {
  // dy/dx = 1 / (2 y) from the saved output.
  return unary(
      a, "sqrt", [](In<T> x, Out<T> y) { y = x.sqrt(); },
      [](In<T>, In<T> y, In<T> dy, auto&& put) { put(T(0.5) * dy / y); });
}

template <typename T>
Tensor<T> pow(const Tensor<T>& a, T p) {
  // dy/dx = p x^(p-1), recomputed from x (y / x would be 0 / 0 at x = 0).
  return unary(
      a, "pow", [p](In<T> x, Out<T> y) { y = x.pow(p); },
      [p](In<T> x, In<T>, In<T> dy, auto&& put) { put(p * dy * x.pow(p - T(1))); });
}

template <typename T>
Tensor<T> tanh(const Tensor<T>& a) {
  // The derivative 1 - y^2 uses the saved output: no second tanh in backward.
  return unary(
      a, "tanh", [](In<T> x, Out<T> y) { y = x.tanh(); },
      [](In<T>, In<T> y, In<T> dy, auto&& put) { put(dy * (T(1) - y.square())); });
}

template <typename T>
Tensor<T> relu(const Tensor<T>& a) {
  // Subgradient 0 at x == 0, as PyTorch.
  return unary(
      a, "relu", [](In<T> x, Out<T> y) { y = x.max(T(0)); },
      [](In<T> x, In<T>, In<T> dy, auto&& put) { put((x > T(0)).select(dy, T(0))); });
}

template <typename T>
Tensor<T> gelu(const Tensor<T>& a) {
  // Backward recomputes tanh(u) from x rather than keeping it alive from forward to backward.
  return unary(
      a, "gelu", [](In<T> x, Out<T> y) { y = detail::gelu_value(x, detail::gelu_tanh(x)); },
      [](In<T> x, In<T>, In<T> dy, auto&& put) {
        const Scratch<T> t = detail::gelu_tanh(x);
        put(detail::gelu_backward(dy, x, t));
      });
}

template <typename T>
Tensor<T> gelu_erf(const Tensor<T>& a) {
  // y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2; dy/dx = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) /
  // sqrt(2 pi). Phi is recomputed from x in backward.
  const auto Phi = [](In<T> x) {
    return T(0.5) * (T(1) + (x * T(0.70710678118654752440)).unaryExpr([](T v) { return std::erf(v); }));
  };
  return unary(
      a, "gelu_erf", [Phi](In<T> x, Out<T> y) { y = x * Phi(x); },
      [Phi](In<T> x, In<T>, In<T> dy, auto&& put) {
        put(dy * (Phi(x) + x * (T(-0.5) * x.square()).exp() * T(0.39894228040143267794)));
      });
}

template <typename T>
Tensor<T> silu(const Tensor<T>& a) {
  // y = x s, s = sigmoid(x) = 1 / (1 + exp(-x)); dy/dx = s (1 + x (1 - s)), s recomputed from x.
  return unary(
      a, "silu", [](In<T> x, Out<T> y) { y = x / (T(1) + (-x).exp()); },
      [](In<T> x, In<T>, In<T> dy, auto&& put) {
        const Scratch<T> s = T(1) / (T(1) + (-x).exp());
        put(dy * s * (T(1) + x * (T(1) - s)));
      });
}

template Tensor<float> exp<float>(const Tensor<float>&);
template Tensor<double> exp<double>(const Tensor<double>&);
template Tensor<float> log<float>(const Tensor<float>&);
template Tensor<double> log<double>(const Tensor<double>&);
template Tensor<float> rsqrt<float>(const Tensor<float>&);
template Tensor<double> rsqrt<double>(const Tensor<double>&);
template Tensor<float> sqrt<float>(const Tensor<float>&);
template Tensor<double> sqrt<double>(const Tensor<double>&);
template Tensor<float> pow<float>(const Tensor<float>&, float);
template Tensor<double> pow<double>(const Tensor<double>&, double);
template Tensor<float> tanh<float>(const Tensor<float>&);
template Tensor<double> tanh<double>(const Tensor<double>&);
template Tensor<float> relu<float>(const Tensor<float>&);
template Tensor<double> relu<double>(const Tensor<double>&);
template Tensor<float> gelu<float>(const Tensor<float>&);
template Tensor<double> gelu<double>(const Tensor<double>&);
template Tensor<float> gelu_erf<float>(const Tensor<float>&);
template Tensor<double> gelu_erf<double>(const Tensor<double>&);
template Tensor<float> silu<float>(const Tensor<float>&);
template Tensor<double> silu<double>(const Tensor<double>&);

}  // namespace ag
