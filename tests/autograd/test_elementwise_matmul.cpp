// Broadcasting elementwise ops, matmul and linear: forward values, broadcasting semantics, error
// messages, and float64 gradient checks (tolerance 1e-6 relative).
#include <boost/test/unit_test.hpp>

#include "autograd/ops.h"
#include "common/random_tensor.h"

using ag::Tensor;
using T = Tensor<double>;
using testing::check_gradients;
using testing::random_tensor;
using Inputs = std::vector<T>;

BOOST_AUTO_TEST_CASE(broadcasting_follows_numpy) {
  T a = T::from({2, 1}, {1.0, 2.0});
  T b = T::from({3}, {10.0, 20.0, 30.0});
  T c = ag::add(a, b);
  BOOST_TEST(c.shape() == ag::Shape({2, 3}), boost::test_tools::per_element());
  BOOST_TEST(c.values() == std::vector<double>({11, 21, 31, 12, 22, 32}), boost::test_tools::per_element());
  BOOST_TEST(ag::broadcast_shape({4, 1, 3}, {5, 1}, "t") == ag::Shape({4, 5, 3}),
             boost::test_tools::per_element());
  T d = ag::div(T::from({2, 2}, {1, 2, 3, 4}), T::scalar(2.0));
  BOOST_TEST(d.values() == std::vector<double>({0.5, 1, 1.5, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_shape_mismatch_names_the_op_and_both_shapes) {
  try {
    ag::mul(T::zeros({2, 3}), T::zeros({4}));
    BOOST_FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()) == "mul: shapes [2, 3] and [4] do not broadcast (dim 1: 3 vs 4)");
  }
  try {
    ag::matmul(T::zeros({2, 3}), T::zeros({4, 5}));
    BOOST_FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()) == "matmul: shapes [2, 3] and [4, 5]: inner dims 3 and 4 differ");
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_add_sub_mul_div_same_shape) {
  for (auto op : {ag::add<double>, ag::sub<double>, ag::mul<double>, ag::div<double>})
    check_gradients([op](const Inputs& x) { return op(x[0], x[1]); },
                    {random_tensor({2, 3, 4}, 1), random_tensor({2, 3, 4}, 2, 0.3, 2.0)});
}

BOOST_AUTO_TEST_CASE(gradcheck_add_sub_mul_div_broadcasting_both_ways) {
  for (auto op : {ag::add<double>, ag::sub<double>, ag::mul<double>, ag::div<double>}) {
    check_gradients([op](const Inputs& x) { return op(x[0], x[1]); },
                    {random_tensor({2, 3, 4}, 3), random_tensor({3, 1}, 4, 0.3, 2.0)});
    check_gradients([op](const Inputs& x) { return op(x[0], x[1]); },
                    {random_tensor({4, 1, 3}, 5, 0.3, 2.0), random_tensor({2, 1}, 6, 0.3, 2.0)});
    check_gradients([op](const Inputs& x) { return op(x[0], x[1]); },
                    {random_tensor({2, 1, 3, 1}, 13, 0.3, 2.0), random_tensor({3, 5}, 14, 0.3, 2.0)});
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_scalar_ops) {
  check_gradients([](const Inputs& x) { return ag::scale(x[0], 2.5); }, {random_tensor({3, 4}, 7)});
  check_gradients([](const Inputs& x) { return ag::add_scalar(x[0], -1.5); }, {random_tensor({3, 4}, 8)});
  check_gradients([](const Inputs& x) { return ag::neg(x[0]); }, {random_tensor({3, 4}, 9)});
}

BOOST_AUTO_TEST_CASE(gradcheck_a_tensor_reused_in_the_graph) {
  // f(x, y) = x * y + x / (y*y) - x: x feeds three ops, y four.
  check_gradients([](const Inputs& x) { return x[0] * x[1] + x[0] / (x[1] * x[1]) - x[0]; },
                  {random_tensor({3, 2}, 10), random_tensor({3, 2}, 11, 0.2, 1.5)});
}

BOOST_AUTO_TEST_CASE(matmul_forward_values) {
  T a = T::from({2, 3}, {1, 2, 3, 4, 5, 6});
  T b = T::from({3, 2}, {7, 8, 9, 10, 11, 12});
  BOOST_TEST(ag::matmul(a, b).values() == std::vector<double>({58, 64, 139, 154}),
             boost::test_tools::per_element());
  // linear(x, W, b) = x W^T + b
  T w = T::from({2, 3}, {1, 0, -1, 0, 1, 0});
  T bias = T::from({2}, {0.5, -0.5});
  BOOST_TEST(ag::linear(a, w, bias).values() == std::vector<double>({-1.5, 1.5, -1.5, 4.5}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gradcheck_matmul_2d_batched_and_nd_by_2d) {
  check_gradients([](const Inputs& x) { return ag::matmul(x[0], x[1]); },
                  {random_tensor({3, 4}, 20), random_tensor({4, 5}, 21)});
  check_gradients([](const Inputs& x) { return ag::matmul(x[0], x[1]); },
                  {random_tensor({2, 3, 3, 4}, 22), random_tensor({2, 3, 4, 2}, 23)});
  check_gradients([](const Inputs& x) { return ag::matmul(x[0], x[1]); },
                  {random_tensor({2, 3, 4}, 24), random_tensor({4, 5}, 25)});
}

BOOST_AUTO_TEST_CASE(gradcheck_linear_with_and_without_bias) {
  check_gradients([](const Inputs& x) { return ag::linear(x[0], x[1], x[2]); },
                  {random_tensor({2, 3, 4}, 30), random_tensor({5, 4}, 31), random_tensor({5}, 32)});
  check_gradients([](const Inputs& x) { return ag::linear(x[0], x[1], T()); },
                  {random_tensor({3, 4}, 33), random_tensor({2, 4}, 34)});
}

BOOST_AUTO_TEST_CASE(float32_matmul_matches_float64) {
  T a = random_tensor({5, 7}, 40, 1.0, 0.0, false), b = random_tensor({7, 3}, 41, 1.0, 0.0, false);
  Tensor<float> af = Tensor<float>::from({5, 7}, std::vector<float>(a.values().begin(), a.values().end()));
  Tensor<float> bf = Tensor<float>::from({7, 3}, std::vector<float>(b.values().begin(), b.values().end()));
  T c = ag::matmul(a, b);
  Tensor<float> cf = ag::matmul(af, bf);
  for (int64_t i = 0; i < c.numel(); ++i)
    BOOST_TEST(cf.data()[i] == c.data()[i], boost::test_tools::tolerance(1e-4));
}
