// Shape ops (transpose, reshape, permute, concat, split, select_rows, gather_rows, take) and reductions
// (sum, mean): values, errors, float64 gradient checks.
#include <boost/test/unit_test.hpp>

#include "autograd/ops.h"
#include "common/random_tensor.h"

using ag::Tensor;
using T = Tensor<double>;
using testing::check_gradients;
using testing::random_tensor;
using Inputs = std::vector<T>;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(transpose_and_permute_move_values_as_pytorch_does) {
  T a = T::from({2, 3}, {1, 2, 3, 4, 5, 6});
  BOOST_TEST(ag::transpose(a).values() == std::vector<double>({1, 4, 2, 5, 3, 6}), tt::per_element());
  // (B=1, T=2, H=2, dk=2) -> (B, H, T, dk): the head split of attention.
  T x = T::from({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  T p = ag::permute(x, {0, 2, 1, 3});
  BOOST_TEST(p.shape() == ag::Shape({1, 2, 2, 2}), tt::per_element());
  BOOST_TEST(p.values() == std::vector<double>({1, 2, 5, 6, 3, 4, 7, 8}), tt::per_element());
  BOOST_CHECK_THROW(ag::permute(x, {0, 1, 1, 3}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(reshape_infers_one_dim_and_rejects_bad_sizes) {
  T a = T::zeros({2, 3, 4});
  BOOST_TEST(ag::reshape(a, {6, -1}).shape() == ag::Shape({6, 4}), tt::per_element());
  try {
    ag::reshape(a, {5, 5});
    BOOST_FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()) == "reshape: cannot view shape [2, 3, 4] as [5, 5]");
  }
}

BOOST_AUTO_TEST_CASE(concat_and_split_are_inverse) {
  T a = T::from({2, 2}, {1, 2, 3, 4});
  T b = T::from({2, 1}, {9, 8});
  T c = ag::concat<double>({a, b}, 1);
  BOOST_TEST(c.values() == std::vector<double>({1, 2, 9, 3, 4, 8}), tt::per_element());
  auto parts = ag::split(c, {2, 1}, -1);
  BOOST_TEST(parts[0].values() == a.values(), tt::per_element());
  BOOST_TEST(parts[1].values() == b.values(), tt::per_element());
  BOOST_CHECK_THROW(ag::split(c, {2, 2}, 1), std::invalid_argument);
  BOOST_CHECK_THROW(ag::concat<double>({a, T::zeros({3, 1})}, 1), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(sum_and_mean_values) {
  T a = T::from({2, 3}, {1, 2, 3, 4, 5, 6});
  BOOST_TEST(ag::sum(a).item() == 21.0);
  BOOST_TEST(ag::mean(a).item() == 3.5);
  BOOST_TEST(ag::sum(a, 0).values() == std::vector<double>({5, 7, 9}), tt::per_element());
  BOOST_TEST(ag::mean(a, 1, true).shape() == ag::Shape({2, 1}), tt::per_element());
  BOOST_TEST(ag::mean(a, -1).values() == std::vector<double>({2, 5}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(gradcheck_transpose_reshape_permute) {
  check_gradients([](const Inputs& x) { return ag::transpose(x[0]); }, {random_tensor({2, 3, 4}, 1)});
  check_gradients([](const Inputs& x) { return ag::reshape(x[0], {4, -1}); }, {random_tensor({2, 3, 4}, 2)});
  check_gradients(
      [](const Inputs& x) {
        return ag::permute(x[0], {0, 2, 1, 3});
      },
      {random_tensor({2, 3, 4, 5}, 3)});
  check_gradients(
      [](const Inputs& x) {
        return ag::permute(x[0], {2, 0, 1});
      },
      {random_tensor({2, 3, 4}, 4)});
}

BOOST_AUTO_TEST_CASE(gradcheck_concat_and_split) {
  check_gradients(
      [](const Inputs& x) {
        return ag::concat<double>({x[0], x[1], x[0]}, 1);
      },
      {random_tensor({2, 3, 2}, 5), random_tensor({2, 1, 2}, 6)});
  check_gradients(
      [](const Inputs& x) {
        auto p = ag::split(x[0], {1, 3}, -1);
        return ag::mul(p[0], p[1]);  // both pieces feed back into one output
      },
      {random_tensor({3, 4}, 7)});
}

BOOST_AUTO_TEST_CASE(select_rows_picks_rows_and_refuses_bad_lists) {
  const T a = T::from({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});  // 6 rows of 2
  const T r = ag::select_rows<double>(a, {1, 4, 5});
  BOOST_TEST((r.shape() == ag::Shape{3, 2}));
  BOOST_TEST(r.to_vector() == (std::vector<double>{2, 3, 8, 9, 10, 11}), boost::test_tools::per_element());
  BOOST_CHECK_THROW(ag::select_rows<double>(a, {2, 1}), std::invalid_argument);  // not increasing
  BOOST_CHECK_THROW(ag::select_rows<double>(a, {3, 3}), std::invalid_argument);  // repeated
  BOOST_CHECK_THROW(ag::select_rows<double>(a, {6}), std::invalid_argument);     // past the last row
}

BOOST_AUTO_TEST_CASE(gradcheck_select_rows) {
  // Rows picked and rows left out, the input also used whole (its gradient adds up from both).
  check_gradients(
      [](const Inputs& x) {
        const auto picked = ag::select_rows(x[0], {0, 2, 3});
        return ag::add(ag::mul(picked, picked), ag::sum(x[0]));
      },
      {random_tensor({5, 3}, 30)});
}

BOOST_AUTO_TEST_CASE(gather_rows_picks_rows_in_any_order_and_refuses_bad_ones) {
  const T a = T::from({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});  // 6 rows of 2
  const T r = ag::gather_rows<double>(a, {5, 1, 1, 0});
  BOOST_TEST((r.shape() == ag::Shape{4, 2}));
  BOOST_TEST(r.to_vector() == (std::vector<double>{10, 11, 2, 3, 2, 3, 0, 1}), tt::per_element());
  BOOST_CHECK_THROW(ag::gather_rows<double>(a, {6}), std::invalid_argument);   // past the last row
  BOOST_CHECK_THROW(ag::gather_rows<double>(a, {-1}), std::invalid_argument);  // negative
  // Written straight in a given shape: the same values, and a shape they do not fill is refused.
  const T s = ag::gather_rows<double>(a, {5, 1, 1, 0}, {2, 2, 2});
  BOOST_TEST((s.shape() == ag::Shape{2, 2, 2}));
  BOOST_TEST(s.to_vector() == r.to_vector(), tt::per_element());
  BOOST_CHECK_THROW(ag::gather_rows<double>(a, {5, 1, 1, 0}, {2, 4}), std::invalid_argument);  // rows of 4
  BOOST_CHECK_THROW(ag::gather_rows<double>(a, {5, 1, 1}, {2, 2, 2}), std::invalid_argument);  // 3 rows
  BOOST_CHECK_THROW(ag::gather_rows<double>(a, {0}, {}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(gradcheck_gather_rows) {
  // Repeated rows (their gradients sum), rows left out, the input also used whole.
  check_gradients(
      [](const Inputs& x) {
        const auto picked = ag::gather_rows(x[0], {3, 0, 3, 3, 1});
        return ag::add(ag::mul(picked, picked), ag::sum(x[0]));
      },
      {random_tensor({5, 3}, 31)});
  // The same into a (2, 3, 3) shape: the gradient sums each output row back to its source row.
  check_gradients(
      [](const Inputs& x) {
        const auto picked = ag::gather_rows(x[0], {4, 0, 4, 2, 2, 1}, {2, 3, 3});
        return ag::add(ag::mul(picked, picked), ag::sum(x[0]));
      },
      {random_tensor({2, 5, 3}, 32)});
}

BOOST_AUTO_TEST_CASE(take_gathers_flat_positions_and_refuses_bad_ones) {
  const T a = T::from({2, 3}, {1, 2, 3, 4, 5, 6});
  const T t = ag::take<double>(a, {5, 0, 0, 3}, {2, 2});
  BOOST_TEST(t.shape() == ag::Shape({2, 2}), tt::per_element());
  BOOST_TEST(t.values() == std::vector<double>({6, 1, 1, 4}), tt::per_element());
  BOOST_CHECK_THROW(ag::take<double>(a, {6}, {1}), std::invalid_argument);     // past the last element
  BOOST_CHECK_THROW(ag::take<double>(a, {-1}, {1}), std::invalid_argument);    // negative
  BOOST_CHECK_THROW(ag::take<double>(a, {0, 1}, {3}), std::invalid_argument);  // shape of 3, 2 indices
  const T s = ag::take<double>(a, {4}, {});                                    // a scalar
  BOOST_TEST(s.item() == 5);
}

BOOST_AUTO_TEST_CASE(gradcheck_take) {
  // A repeated index (its gradient sums), positions left out (zero gradient), the input also used whole.
  check_gradients(
      [](const Inputs& x) {
        const auto picked = ag::take<double>(x[0], {7, 1, 1, 11, 0, 7}, {3, 2});
        return ag::add(ag::mul(picked, picked), ag::sum(x[0]));
      },
      {random_tensor({3, 4}, 31)});
}

BOOST_AUTO_TEST_CASE(gradcheck_sum_and_mean) {
  check_gradients([](const Inputs& x) { return ag::sum(x[0]); }, {random_tensor({2, 3}, 8)});
  check_gradients([](const Inputs& x) { return ag::mean(x[0]); }, {random_tensor({2, 3}, 9)});
  for (int64_t dim : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      check_gradients([=](const Inputs& x) { return ag::sum(x[0], dim, keep); },
                      {random_tensor({2, 3, 4}, 10)});
      check_gradients([=](const Inputs& x) { return ag::mean(x[0], dim, keep); },
                      {random_tensor({2, 3, 4}, 11)});
    }
}
