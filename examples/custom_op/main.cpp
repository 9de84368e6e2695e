// A new differentiable op written outside attograd, with the recipe of autograd/ops.h ("How to add an
// op"), and its float64 gradient check: softplus(x) = log(1 + exp(x)), whose derivative is sigmoid(x).
// Prints the worst relative error; exits 1 when it is over the tolerance.
#include <cstdio>

#include "attograd/autograd/gradcheck.h"
#include "attograd/autograd/ops.h"
#include "attograd/autograd/random.h"

template <typename T>
ag::Tensor<T> softplus(const ag::Tensor<T>& a) {
  ag::Tensor<T> out = ag::Tensor<T>::empty(a.shape());
  // max(x, 0) + log1p(exp(-|x|)): no overflow for large x.
  out.vec() = a.vec().max(T(0)) + (-a.vec().abs()).exp().log1p();
  if (ag::needs_grad<T>({&a}))
    ag::attach(out, "softplus", {a.node_ptr()}, [](ag::Node<T>& n) {  // n is out's node, n.grad is dy
      const ag::detail::Grad<T> da(*n.inputs[0]);                     // empty if a needs no gradient
      if (!da) return;
      ag::ConstVecMap<T> x(n.inputs[0]->value.data(), n.numel()), dy(n.grad.data(), n.numel());
      da.put(0, n.numel(), dy / (T(1) + (-x).exp()));  // dy * sigmoid(x): = into a fresh buffer, else +=
    });
  return out;
}

int main() {
  ag::Rng rng(7);
  std::vector<double> values(3 * 5);
  for (double& v : values) v = rng.normal(0.0, 3.0);
  const auto x = ag::Tensor<double>::from({3, 5}, values, /*requires_grad=*/true);

  // Through another op too, so the check covers gradients flowing in from downstream.
  const ag::GradcheckResult r =
      ag::gradcheck([](const std::vector<ag::Tensor<double>>& in) { return ag::tanh(softplus(in[0])); }, {x});
  const double tolerance = 1e-6;
  std::printf("softplus gradcheck: max relative error %.3e (tolerance %.0e)\n", r.worst(), tolerance);
  if (!(r.worst() <= tolerance)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("passed\n");
}
