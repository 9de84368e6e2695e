// jumprelu, jumprelu_step and batch_topk_relu (autograd/ops_dictionary.cpp), in float64: JumpReLU's
// gradient to pre and BatchTopK's match finite differences; the thresholds' gradients (pseudo-derivatives,
// which no finite difference gives) match their definitions, SAELens's, computed here element by element;
// BatchTopK keeps the batch's largest entries, not each row's.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/random.h"

namespace {

// pre (N, M) with every entry at least `margin` from every threshold and from 0, and some inside the
// kernel's window: random values in [-2, 2] moved off the edges.
ag::Tensor<double> random_pre(int64_t N, int64_t M, const std::vector<double>& theta, double bandwidth,
                              uint64_t seed) {
  ag::Rng rng(seed);
  ag::Tensor<double> pre = ag::Tensor<double>::empty({N, M});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < M; ++j) {
      double v = 4 * rng.uniform() - 2;
      // A third of the entries within the kernel's window around the threshold (but not on it).
      if (n % 3 == 0) v = theta[j] + bandwidth * (0.45 * (2 * rng.uniform() - 1));
      if (std::abs(v - theta[j]) < 1e-4) v += 2e-4;
      pre.data()[n * M + j] = v;
    }
  return pre;
}

double rect(double u) {
  return u > -0.5 && u < 0.5 ? 1.0 : 0.0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(jumprelu_and_step_gradients_are_their_definitions) {
  const int64_t N = 9, M = 5;
  const double bw = 0.05;
  const std::vector<double> theta = {0.1, 0.3, 0.05, 0.7, 0.2};
  const ag::Tensor<double> pre0 = random_pre(N, M, theta, bw, 3);
  ag::Rng rng(5);
  ag::Tensor<double> dy = ag::Tensor<double>::empty({N, M});
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data()[i] = 2 * rng.uniform() - 1;
  for (const bool step : {false, true}) {
    ag::Tensor<double> pre = pre0.detach().set_requires_grad(true);
    ag::Tensor<double> th = ag::Tensor<double>::from({M}, theta).set_requires_grad(true);
    const ag::Tensor<double> f = step ? ag::jumprelu_step(pre, th, bw) : ag::jumprelu(pre, th, bw);
    ag::sum(f * dy).backward();
    const ag::Tensor<double> dpre = pre.grad_tensor(), dth = th.grad_tensor();
    double worst_forward = 0, worst_pre = 0, worst_theta = 0;
    for (int64_t j = 0; j < M; ++j) {
      double expect = 0;  // d threshold_j by the definition
      for (int64_t n = 0; n < N; ++n) {
        const double x = pre0.data()[n * M + j], g = dy.data()[n * M + j];
        const double on = x > theta[j] ? 1 : 0;
        worst_forward = std::max(worst_forward, std::abs(f.data()[n * M + j] - (step ? on : x * on)));
        worst_pre = std::max(worst_pre, std::abs(dpre.data()[n * M + j] - (step ? 0.0 : on * g)));
        expect += -(step ? 1.0 : theta[j]) / bw * rect((x - theta[j]) / bw) * g;
      }
      worst_theta = std::max(worst_theta, std::abs(dth.data()[j] - expect));
      BOOST_TEST(expect != 0.0);  // entries fall in the kernel's window: the check is not vacuous
    }
    BOOST_TEST(worst_forward == 0.0);
    BOOST_TEST(worst_pre < 1e-15);
    BOOST_TEST(worst_theta < 1e-12, (step ? "step" : "jumprelu") << " threshold gradient: " << worst_theta);
  }
  // d pre of JumpReLU by finite differences too (pre stays off the thresholds).
  const ag::Tensor<double> th = ag::Tensor<double>::from({M}, theta);
  const ag::GradcheckResult r = ag::gradcheck(
      [&](const std::vector<ag::Tensor<double>>& in) { return ag::sum(ag::jumprelu(in[0], th, bw) * dy); },
      {pre0.detach().set_requires_grad(true)});
  BOOST_TEST(r.worst() < 1e-8, r.report({"pre"}));
}

BOOST_AUTO_TEST_CASE(batch_topk_keeps_the_batchs_largest_and_passes_their_gradient) {
  const int64_t N = 6, M = 7, keep = 10;
  ag::Rng rng(11);
  ag::Tensor<double> pre = ag::Tensor<double>::empty({N, M});
  for (int64_t i = 0; i < pre.numel(); ++i) pre.data()[i] = 4 * rng.uniform() - 1;
  const ag::Tensor<double> f = ag::batch_topk_relu(pre, keep);
  std::vector<double> sorted(pre.data(), pre.data() + pre.numel());
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  int64_t kept = 0;
  std::vector<int64_t> per_row(N, 0);
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (f.data()[i] == 0) continue;
    ++kept;
    ++per_row[i / M];
    BOOST_TEST(f.data()[i] == pre.data()[i]);
    BOOST_TEST(pre.data()[i] >= sorted[keep - 1]);
  }
  BOOST_TEST(kept == keep);
  BOOST_TEST(*std::max_element(per_row.begin(), per_row.end()) !=
             *std::min_element(per_row.begin(), per_row.end()));
  ag::Tensor<double> w = ag::Tensor<double>::empty({N, M});
  for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] = 2 * rng.uniform() - 1;
  const ag::GradcheckResult r = ag::gradcheck(
      [&](const std::vector<ag::Tensor<double>>& in) {
        return ag::sum(ag::batch_topk_relu(in[0], keep) * w);
      },
      {pre.detach().set_requires_grad(true)});
  BOOST_TEST(r.worst() < 1e-8, r.report({"pre"}));
}
