#include <boost/test/unit_test.hpp>

// topk_relu, relu_decode and sparse_grad_linear (autograd/ops_sparse.cpp): each forward against its dense
// composition of engine ops (topk_relu against a sort), float64 gradient checks (sparse_grad_linear with
// a dense and a sparse incoming gradient, and without x's gradient), and the one-line shape errors.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "common/fixture.h"

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(relu_decode_is_relu_then_matmul_and_passes_gradcheck) {
  ag::Rng rng(4);
  auto randn = [&](const ag::Shape& shape) {
    ag::Tensor<double> t = ag::Tensor<double>::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.normal();
    return t.set_requires_grad(true);
  };
  const ag::Tensor<double> pre = randn({7, 9}), W = randn({9, 5});
  const ag::Tensor<double> y = ag::relu_decode(pre, W), ref = ag::matmul(ag::relu(pre), W);
  BOOST_TEST(testing::compare(y, ref.detach()).max_abs < 1e-12);
  const ag::GradcheckResult r = ag::gradcheck(
      [](const std::vector<ag::Tensor<double>>& in) { return ag::relu_decode(in[0], in[1]); }, {pre, W});
  BOOST_TEST(r.worst() < 1e-7, r.report({"pre", "W"}));
  BOOST_TEST(error_of([&] { ag::relu_decode(W, W); }) ==
             "relu_decode: expected pre (N, M) and W (M, D), got [9, 5] and [9, 5]");
}

BOOST_AUTO_TEST_CASE(sparse_grad_linear_is_a_linear_and_passes_gradcheck_dense_and_sparse) {
  ag::Rng rng(6);
  auto randn = [&](const ag::Shape& shape, double shift) {
    ag::Tensor<double> t = ag::Tensor<double>::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.normal() + shift;
    return t.set_requires_grad(true);
  };
  const ag::Tensor<double> x = randn({8, 5}, 0), c = randn({5}, 0.5), W = randn({5, 30}, 0);
  for (const double shift : {0.0, -4.0}) {  // dense d(out); behind a ReLU with most outputs negative, sparse
    const ag::Tensor<double> b = randn({30}, shift);
    const ag::Tensor<double> y = ag::sparse_grad_linear(x, c, W, b), ref = ag::matmul(x - c, W) + b;
    BOOST_TEST(testing::compare(y, ref.detach()).max_abs < 1e-12);
    const ag::GradcheckResult r = ag::gradcheck(
        [shift](const std::vector<ag::Tensor<double>>& in) {
          const ag::Tensor<double> out = ag::sparse_grad_linear(in[0], in[1], in[2], in[3]);
          return shift < 0 ? ag::relu(out) : out;
        },
        {x, c, W, b});
    BOOST_TEST(r.worst() < 1e-7, "shift " << shift << ": " << r.report({"x", "c", "W", "b"}));
    // Without x's gradient (as in training, where x is data), c's still comes out right.
    const ag::Tensor<double> data = x.detach();
    const ag::GradcheckResult rc = ag::gradcheck(
        [&](const std::vector<ag::Tensor<double>>& in) {
          return ag::relu(ag::sparse_grad_linear(data, in[0], in[1], in[2]));
        },
        {c, W, b});
    BOOST_TEST(rc.worst() < 1e-7, "shift " << shift << ": " << rc.report({"c", "W", "b"}));
  }
}

BOOST_AUTO_TEST_CASE(topk_relu_keeps_each_rows_k_largest_positive_and_passes_gradcheck) {
  ag::Rng rng(8);
  for (const int k : {1, 3, 7, 40}) {
    ag::Tensor<double> pre = ag::Tensor<double>::empty({6, 37});
    for (int64_t i = 0; i < pre.numel(); ++i) pre.data()[i] = rng.normal() + 0.3;
    // Ties: row 1 is all one value, row 2 has repeats around its k-th largest; row 3 all negative.
    for (int64_t j = 0; j < 37; ++j) {
      pre.data()[37 + j] = 0.5;
      pre.data()[2 * 37 + j] = static_cast<double>((j * 7) % 5);
      pre.data()[3 * 37 + j] = -1.0 - j;
    }
    pre.set_requires_grad(true);
    const ag::Tensor<double> f = ag::topk_relu(pre, k);
    // The reference: sort each row by (value descending, index ascending), keep the first k, relu.
    for (int64_t r = 0; r < 6; ++r) {
      std::vector<int> order(37);
      std::iota(order.begin(), order.end(), 0);
      const double* row = pre.data() + r * 37;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
      std::vector<double> want(37, 0.0);
      for (int i = 0; i < std::min(k, 37); ++i) want[order[i]] = std::max(0.0, row[order[i]]);
      for (int64_t j = 0; j < 37; ++j)
        BOOST_TEST(f.data()[r * 37 + j] == want[j], "k " << k << ", row " << r << ", column " << j);
    }
    // Away from ties (rows 0, 4 and 5 are random), the gradient is the kept entries'.
    ag::Tensor<double> smooth = ag::Tensor<double>::empty({3, 37});
    for (int64_t i = 0; i < smooth.numel(); ++i) smooth.data()[i] = rng.normal();
    smooth.set_requires_grad(true);
    const ag::GradcheckResult r = ag::gradcheck(
        [k](const std::vector<ag::Tensor<double>>& in) { return ag::topk_relu(in[0], k); }, {smooth});
    BOOST_TEST(r.worst() < 1e-7, "k " << k << ": " << r.report({"pre"}));
  }
}
