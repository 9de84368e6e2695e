// rotary (RoPE in GPT-NeoX's rotate_half layout): values by hand, partial rotation, the position offset
// incremental decoding uses, norms kept, float64 gradient checks (with the gradient accumulating into an
// input used twice), the float32 path, and the error messages.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "common/op_test_helpers.h"

using ag::Tensor;
using T = Tensor<double>;
using testing::check_close;
using testing::check_gradients;
using testing::contains;
using testing::error_of;
using testing::random_tensor;

BOOST_AUTO_TEST_CASE(turns_each_pair_by_position_times_its_frequency) {
  // (B 1, T 2, H 1, dk 4), all four dims turned, base 10000: pair 0 turns by 1 a position, pair 1 by
  // 10000^(-2/4) = 0.01; position 0 is the identity.
  const T x = T::from({1, 2, 1, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  const std::vector<double> y = ag::rotary(x, 4, 4, 10000.0).to_vector();
  const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
  // (x1, x2) pairs are (x[0], x[2]) and (x[1], x[3]): out1 = x1 c - x2 s, out2 = x2 c + x1 s.
  check_close(y, {1, 2, 3, 4, 1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1}, 1e-15,
              "rotary values");
  BOOST_TEST(ag::rotary_angle(3, 1, 4, 10000.0) == 3 * std::pow(10000.0, -0.5));
}

BOOST_AUTO_TEST_CASE(partial_rotation_leaves_the_rest_and_every_head_alike) {
  // (B 2, T 3, H * dk = 2 * 6), rotary_dims 4: dims 4 and 5 of each head pass through, and the two heads
  // of a position turn by the same angles (the same input gives the same output).
  std::vector<double> v(2 * 3 * 12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * double(i) + 0.3);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 6; ++j) v[r * 12 + 6 + j] = v[r * 12 + j];  // head 1 = head 0
  const T x = T::from({2, 3, 12}, v);
  const std::vector<double> y = ag::rotary(x, 6, 4, 10.0).to_vector();
  for (int r = 0; r < 6; ++r) {
    const int t = r % 3;
    for (int j = 4; j < 6; ++j) BOOST_TEST(y[r * 12 + j] == v[r * 12 + j]);
    for (int j = 0; j < 6; ++j) BOOST_TEST(y[r * 12 + 6 + j] == y[r * 12 + j]);
    double before = 0, after = 0;  // a rotation keeps each head's norm
    for (int j = 0; j < 6; ++j)
      before += v[r * 12 + j] * v[r * 12 + j], after += y[r * 12 + j] * y[r * 12 + j];
    BOOST_TEST(std::abs(before - after) < 1e-12);
    if (t == 0)
      for (int j = 0; j < 4; ++j) BOOST_TEST(y[r * 12 + j] == v[r * 12 + j]);
  }
}

BOOST_AUTO_TEST_CASE(first_position_continues_the_sequence) {
  // Positions 2..4 read alone with first_position 2 turn as they do in the whole sequence 0..4.
  const T whole = random_tensor({1, 5, 2, 4}, 11);
  const std::vector<double> all = ag::rotary(whole, 4, 4, 50.0).to_vector();
  const std::vector<double> w = whole.to_vector();
  const T tail = T::from({1, 3, 2, 4}, std::vector<double>(w.begin() + 2 * 8, w.end()));
  check_close(ag::rotary(tail, 4, 4, 50.0, 2).to_vector(),
              std::vector<double>(all.begin() + 2 * 8, all.end()), 1e-15, "positions 2..4");
}

BOOST_AUTO_TEST_CASE(rotary_gradcheck) {
  check_gradients("rotary (B, T, H, dk)", [](const auto& in) { return ag::rotary(in[0], 6, 4, 10.0, 3); },
                  {random_tensor({2, 4, 2, 6}, 12)});
  check_gradients("rotary (B, T, D)", [](const auto& in) { return ag::rotary(in[0], 4, 4, 10000.0); },
                  {random_tensor({3, 5, 8}, 13)});
  // x used twice: the rotary's gradient adds to the other use's.
  check_gradients("rotary accumulating", [](const auto& in) { return ag::rotary(in[0], 4, 2, 7.0) * in[0]; },
                  {random_tensor({2, 3, 8}, 14)});
}

BOOST_AUTO_TEST_CASE(float32_follows_float64) {
  const T x = random_tensor({2, 6, 16}, 15, 2.0);
  const std::vector<double> want = ag::rotary(x, 8, 6, 10000.0, 4).to_vector();
  check_close(ag::rotary(testing::to_float(x, false), 8, 6, 10000.0, 4).to_vector(), want, 1e-6,
              "float32 rotary");
}

BOOST_AUTO_TEST_CASE(rotary_rejects_bad_arguments) {
  const T x = random_tensor({1, 2, 8}, 16);
  std::string e = error_of([&] { ag::rotary(x, 4, 3, 10.0); });
  BOOST_CHECK_MESSAGE(contains(e, "rotary") && contains(e, "even"), e);
  e = error_of([&] { ag::rotary(x, 4, 6, 10.0); });
  BOOST_CHECK_MESSAGE(contains(e, "head_dim 4"), e);
  e = error_of([&] { ag::rotary(x, 3, 2, 10.0); });
  BOOST_CHECK_MESSAGE(contains(e, "[1, 2, 8]") && contains(e, "heads of 3"), e);
  e = error_of([&] { ag::rotary(random_tensor({2, 8}, 17), 4, 2, 10.0); });
  BOOST_CHECK_MESSAGE(contains(e, "(B, T"), e);
  e = error_of([&] { ag::rotary(x, 4, 2, 0.0); });
  BOOST_CHECK_MESSAGE(contains(e, "base"), e);
}
