// GELU's tanh form, as torch's approximate="tanh": gelu(x) = 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x +
// 0.044715 x^3)). One definition for every op that evaluates it (ops_unary.cpp's gelu, the fused
// gelu_linear of ops_linear_fused.cpp), so they compute the same formula. Each helper takes Eigen arrays and
// returns an expression over them: evaluate it while its arguments are alive.
#pragma once

#include <Eigen/Core>

namespace ag::detail {

template <typename T>
constexpr T kGeluC = T(0.7978845608028654);  // sqrt(2 / pi)
template <typename T>
constexpr T kGeluK = T(0.044715);

// t = tanh(sqrt(2/pi) (x + 0.044715 x^3)): the one transcendental of both the value and the derivative.
template <typename X>
auto gelu_tanh(const Eigen::ArrayBase<X>& x) {
  using T = typename X::Scalar;
  return (kGeluC<T> * (x + kGeluK<T> * x.cube())).tanh();
}

// gelu(x) = 0.5 x (1 + t).
template <typename X, typename Tanh>
auto gelu_value(const Eigen::ArrayBase<X>& x, const Eigen::ArrayBase<Tanh>& t) {
  using T = typename X::Scalar;
  return T(0.5) * x * (T(1) + t);
}

// dy * gelu'(x) = dy * 0.5 ((1 + t) + x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)).
template <typename Dy, typename X, typename Tanh>
auto gelu_backward(const Eigen::ArrayBase<Dy>& dy, const Eigen::ArrayBase<X>& x,
                   const Eigen::ArrayBase<Tanh>& t) {
  using T = typename X::Scalar;
  const T c = kGeluC<T>, k = kGeluK<T>;
  return dy * T(0.5) * ((T(1) + t) + x * (T(1) - t.square()) * c * (T(1) + T(3) * k * x.square()));
}

}  // namespace ag::detail
