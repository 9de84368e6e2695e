#include <boost/test/unit_test.hpp>

// softmax, log_softmax, masked_fill and cross_entropy: known values, PyTorch references, masked rows
// (zeros and zero gradient, never NaN), broadcast masks, ignored targets, float64 gradient checks, the
// float32 path, and the error messages.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd/softmax_row.h"
#include "autograd/threads.h"
#include "common/op_test_helpers.h"

using ag::Tensor;
using testing::all_finite;
using testing::check_close;
using testing::check_gradients;
using testing::contains;
using testing::error_of;
using testing::random_tensor;
using testing::to_float;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Logits shared by the cross-entropy tests (4 rows, V = 5).
const std::vector<double> kLogits = {0.5,  -1.2, 2.0, 0.3,  0.0, 1.5, 0.2,  -0.7, 0.9, -2.0,
                                     -0.3, 0.8,  0.1, -1.1, 2.2, 3.0, -0.5, 0.4,  0.6, -1.0};

}  // namespace

// ---- softmax ----

BOOST_AUTO_TEST_CASE(softmax_known_values) {
  const std::vector<double> want = {0.659001, 0.242433, 0.098566};  // the textbook example
  check_close(ag::softmax(Tensor<double>::from({3}, {2.0, 1.0, 0.1})).values(), want, 1e-5, "softmax");
  check_close(ag::softmax(Tensor<float>::from({3}, {2.0f, 1.0f, 0.1f})).values(), want, 1e-5, "softmax f32");
}

BOOST_AUTO_TEST_CASE(softmax_is_max_shifted) {
  // Without the shift exp(1000) overflows; 1 / (1 + e) = 0.2689414213699951.
  const auto y = ag::softmax(Tensor<float>::from({1, 2}, {1000.0f, 1001.0f})).values();
  check_close(y, {0.2689414213699951, 0.7310585786300049}, 1e-6, "softmax large");
}

// The row kernel works a SIMD packet at a time (4 to 16 lanes) and the last partial one on a padded
// copy: every row length from 1 to 40, with -inf at scattered places (the first, the last, the whole row
// for length 1), against exp written out in long double, and the same bits in place.
template <typename T>
void check_every_row_length(double tolerance) {
  for (int64_t n = 1; n <= 40; ++n) {
    std::vector<T> x(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      x[j] = (j % 7 == 0 || j == n - 1) && n > 1 && j != 1 ? -std::numeric_limits<T>::infinity()
                                                           : T(0.37 * double((j * 5) % 11) - 1.3);
    const std::vector<T> y = ag::softmax(Tensor<T>::from({n}, x)).to_vector();
    std::vector<T> in_place = x;  // fused attention runs the row kernel over the scores in place
    ag::softmax_row(in_place.data(), in_place.data(), n);
    BOOST_TEST(in_place == y, "in place, n " << n);
    long double m = -INFINITY, sum = 0;
    for (T v : x) m = std::max<long double>(m, v);
    for (T v : x) sum += std::isinf(v) ? 0.0L : std::exp(static_cast<long double>(v) - m);
    for (int64_t j = 0; j < n; ++j) {
      if (std::isinf(x[j])) {
        BOOST_TEST(y[j] == T(0), "n " << n << " entry " << j);
        continue;
      }
      const long double want = std::exp(static_cast<long double>(x[j]) - m) / sum;
      BOOST_TEST(std::abs(static_cast<double>(y[j] - want)) < tolerance, "n " << n << " entry " << j);
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_every_row_length_matches_exp) {
  check_every_row_length<double>(1e-15);
  check_every_row_length<float>(1e-7);
}

// softmax_rows runs each pass over a group of rows (8) before the next: 11 rows of 19 values, 24 apart,
// in place, one of them all -inf, against softmax_row on each row alone (the same bits), and the 5
// entries between rows left as they were.
template <typename T>
void check_rows_as_one_row_each() {
  const int64_t rows = 11, n = 19, stride = 24;
  const T ninf = -std::numeric_limits<T>::infinity(), untouched = T(42);
  std::vector<T> x(static_cast<size_t>(rows * stride), untouched);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      x[r * stride + j] = r == 6 || (j + r) % 5 == 0 ? ninf : T(0.21 * double((j * 7 + r * 3) % 13) - 1.1);
  std::vector<T> block = x;
  ag::softmax_rows(block.data(), block.data(), rows, n, stride);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<T> alone(x.begin() + r * stride, x.begin() + r * stride + n);
    ag::softmax_row(alone.data(), alone.data(), n);
    for (int64_t j = 0; j < stride; ++j)
      BOOST_TEST(block[r * stride + j] == (j < n ? alone[j] : untouched), "row " << r << " entry " << j);
  }
}

BOOST_AUTO_TEST_CASE(softmax_rows_equal_each_row_alone) {
  check_rows_as_one_row_each<double>();
  check_rows_as_one_row_each<float>();
}

BOOST_AUTO_TEST_CASE(softmax_gradcheck) {
  check_gradients("softmax", [](const auto& in) { return ag::softmax(in[0]); },
                  {random_tensor({2, 3, 5}, 11, 2.0)});
}

BOOST_AUTO_TEST_CASE(softmax_masked_row_gives_zeros_and_zero_grad) {
  // Row 0 live, row 1 masked everywhere, row 2 masked in two places.
  auto x = Tensor<double>::from({3, 4},
                                {0.5, -1.0, 2.0, 0.1,         //
                                 -kInf, -kInf, -kInf, -kInf,  //
                                 1.0, -kInf, 0.3, -kInf},
                                true);
  auto y = ag::softmax(x);
  BOOST_CHECK(all_finite(y.values()));
  for (int c = 0; c < 4; ++c) BOOST_CHECK_EQUAL(y.values()[4 + c], 0.0);
  BOOST_CHECK_EQUAL(y.values()[9], 0.0);  // exactly zero, not a denormal from exp(-inf)
  BOOST_CHECK_EQUAL(y.values()[11], 0.0);
  check_close(std::vector<double>{y.values()[8] + y.values()[10]}, {1.0}, 1e-15, "partial row sum");
  y.backward(random_tensor({3, 4}, 12).to_vector());
  const auto g = x.grad_tensor().values();
  BOOST_CHECK(all_finite(g));
  for (int c = 0; c < 4; ++c) BOOST_CHECK_EQUAL(g[4 + c], 0.0);
  BOOST_CHECK_EQUAL(g[9], 0.0);
  BOOST_CHECK_EQUAL(g[11], 0.0);

  auto yf = ag::softmax(to_float(x, false));
  BOOST_CHECK(all_finite(yf.values()));
  for (int c = 0; c < 4; ++c) BOOST_CHECK_EQUAL(yf.values()[4 + c], 0.0f);
}

BOOST_AUTO_TEST_CASE(softmax_after_masked_fill_gradcheck) {
  // The attention pattern: a causal mask plus one query row that may look at nothing.
  auto mask = Tensor<double>::from({4, 4}, {0, 1, 1, 1,  //
                                            1, 1, 1, 1,  //
                                            0, 0, 0, 1,  //
                                            0, 0, 0, 0});
  check_gradients("softmax(masked_fill(x, mask, -inf))",
                  [mask](const auto& in) { return ag::softmax(ag::masked_fill(in[0], mask, -kInf)); },
                  {random_tensor({2, 4, 4}, 13)});
}

BOOST_AUTO_TEST_CASE(softmax_threads_do_not_change_results) {
  // 64 x 1024 crosses the thread pool's threshold. Each row is computed by one thread, so one thread and many
  // give bitwise the same values and gradients.
  auto x = random_tensor({64, 1024}, 14, 3.0);
  const auto seed = random_tensor({64, 1024}, 15).to_vector();
  auto run = [&](int threads) {
    const int saved = ag::num_threads();
    ag::set_num_threads(threads);
    x.zero_grad();
    auto y = ag::softmax(x);
    y.backward(seed);
    ag::set_num_threads(saved);
    return std::make_pair(y.values(), x.grad_tensor().values());
  };
  const auto one = run(1);
  const auto many = run(2);
  BOOST_CHECK(one.first == many.first);
  BOOST_CHECK(one.second == many.second);
}

BOOST_AUTO_TEST_CASE(softmax_rejects_scalar) {
  const std::string e = error_of([] { ag::softmax(Tensor<double>::scalar(1.0)); });
  BOOST_CHECK_MESSAGE(contains(e, "softmax") && contains(e, "[]"), e);
}

// ---- log_softmax ----

BOOST_AUTO_TEST_CASE(log_softmax_matches_torch) {
  // F.log_softmax(torch.tensor([[1., 2., 3.], [-1., 0., 5.]], dtype=torch.float64), -1), PyTorch 1.13.
  const std::vector<double> want = {-2.4076059644443806, -1.4076059644443804, -0.40760596444438041,
                                    -6.0091744845917345, -5.0091744845917345, -0.0091744845917347273};
  const auto x = Tensor<double>::from({2, 3}, {1, 2, 3, -1, 0, 5});
  check_close(ag::log_softmax(x).values(), want, 1e-14, "log_softmax");
  check_close(ag::log_softmax(to_float(x)).values(), want, 1e-6, "log_softmax f32");
}

BOOST_AUTO_TEST_CASE(log_softmax_gradcheck) {
  check_gradients("log_softmax", [](const auto& in) { return ag::log_softmax(in[0]); },
                  {random_tensor({3, 2, 6}, 21, 2.0)});
  // A single column: the output is constantly 0, so the gradient must be 0 too.
  check_gradients("log_softmax one column", [](const auto& in) { return ag::log_softmax(in[0]); },
                  {random_tensor({3, 1}, 22)});
}

BOOST_AUTO_TEST_CASE(log_softmax_masked_row_gives_zeros_and_zero_grad) {
  auto mask = Tensor<double>::from({3, 1}, {0, 1, 0});  // masks all of row 1
  auto x = random_tensor({3, 4}, 23);
  auto y = ag::log_softmax(ag::masked_fill(x, mask, -kInf));
  BOOST_CHECK(all_finite(y.values()));
  for (int c = 0; c < 4; ++c) BOOST_CHECK_EQUAL(y.values()[4 + c], 0.0);
  y.backward(random_tensor({3, 4}, 24).to_vector());
  const auto g = x.grad_tensor().values();
  BOOST_CHECK(all_finite(g));
  for (int c = 0; c < 4; ++c) BOOST_CHECK_EQUAL(g[4 + c], 0.0);
  check_gradients("log_softmax(masked_fill(x, row mask, -inf))",
                  [mask](const auto& in) { return ag::log_softmax(ag::masked_fill(in[0], mask, -kInf)); },
                  {random_tensor({3, 4}, 25)});
}

// ---- masked_fill ----

BOOST_AUTO_TEST_CASE(masked_fill_broadcasts_mask) {
  auto x = random_tensor({2, 3, 4}, 31);
  // Masks of shape [4] (varies along the row), [3, 1] (whole rows) and [2, 1, 4] (per batch).
  const std::vector<Tensor<double>> masks = {Tensor<double>::from({4}, {0, 1, 0, 1}),
                                             Tensor<double>::from({3, 1}, {1, 0, 0}),
                                             Tensor<double>::from({2, 1, 4}, {1, 0, 0, 0, 0, 0, 2.5, 0})};
  auto masked_at = [&](size_t k, int b, int r, int c) -> bool {
    if (k == 0) return masks[0].values()[c] != 0;
    if (k == 1) return masks[1].values()[r] != 0;
    return masks[2].values()[b * 4 + c] != 0;
  };
  for (size_t k = 0; k < masks.size(); ++k) {
    x.zero_grad();
    auto y = ag::masked_fill(x, masks[k], -7.0);
    BOOST_CHECK(y.shape() == x.shape());
    const std::vector<double> seed = random_tensor({2, 3, 4}, 32).to_vector();
    y.backward(seed);
    const auto g = x.grad_tensor().values();
    for (int b = 0; b < 2; ++b)
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) {
          const int i = (b * 3 + r) * 4 + c;
          const bool m = masked_at(k, b, r, c);
          BOOST_CHECK_EQUAL(y.values()[i], m ? -7.0 : x.values()[i]);
          BOOST_CHECK_EQUAL(g[i], m ? 0.0 : seed[i]);
        }
  }
}

BOOST_AUTO_TEST_CASE(masked_fill_mask_gets_no_grad) {
  auto x = random_tensor({2, 3}, 33);
  auto mask = Tensor<double>::from({3}, {0, 1, 0}, true);
  ag::masked_fill(x, mask, 0.0).backward(std::vector<double>(6, 1.0));
  BOOST_CHECK(!mask.has_grad());
  check_close(x.grad_tensor().values(), {1, 0, 1, 1, 0, 1}, 0.0, "masked_fill grad");
}

BOOST_AUTO_TEST_CASE(masked_fill_gradcheck) {
  auto mask = Tensor<double>::from({1, 5}, {1, 0, 0, 1, 0});
  check_gradients("masked_fill", [mask](const auto& in) { return ag::masked_fill(in[0], mask, 0.5); },
                  {random_tensor({3, 5}, 34)});
}

BOOST_AUTO_TEST_CASE(masked_fill_rejects_mask_that_does_not_broadcast) {
  const auto x = random_tensor({2, 3, 4}, 35);
  std::string e = error_of([&] { ag::masked_fill(x, Tensor<double>::zeros({2, 4}), 0.0); });
  BOOST_CHECK_MESSAGE(contains(e, "masked_fill") && contains(e, "[2, 4]") && contains(e, "[2, 3, 4]"), e);
  e = error_of([&] { ag::masked_fill(x, Tensor<double>::zeros({1, 2, 3, 4}), 0.0); });
  BOOST_CHECK_MESSAGE(contains(e, "masked_fill") && contains(e, "[1, 2, 3, 4]"), e);
}

// ---- cross_entropy ----

BOOST_AUTO_TEST_CASE(cross_entropy_matches_torch_with_ignored_rows) {
  // Made offline with PyTorch 1.13 in float64:
  //   logits = torch.tensor(kLogits).reshape(4, 5).requires_grad_()
  //   F.cross_entropy(logits, torch.tensor([1, -1, 4, 0]), ignore_index=-1)  -> 1.4165312137948709, and
  //   .backward() gives logits.grad below;
  //   F.cross_entropy(logits, torch.tensor([0, 3, 0, 2]), ignore_index=0)    -> 2.0338260805261843
  //   F.cross_entropy(logits, torch.tensor([1, 3, 4, 0]))                    -> 1.3809333259077274
  const std::vector<double> want_grad = {0.047017001582265711,
                                         -0.32474410179389201,
                                         0.21071558211130773,
                                         0.038494265112917064,
                                         0.028517252987401542,
                                         0,
                                         0,
                                         0,
                                         0,
                                         0,
                                         0.01838795013205443,
                                         0.055240455036739231,
                                         0.027431598145994846,
                                         0.0082622385850751393,
                                         -0.10932224189986361,
                                         -0.058646821209864565,
                                         0.0082948139275317231,
                                         0.020401950142625025,
                                         0.024918998176048479,
                                         0.0050310589636593569};
  auto logits = Tensor<double>::from({4, 5}, kLogits, true);
  auto loss = ag::cross_entropy(logits, {1, -1, 4, 0}, -1);
  BOOST_CHECK(loss.shape().empty());
  check_close(loss.values(), {1.4165312137948709}, 1e-14, "cross_entropy ignore -1");
  loss.backward();
  check_close(logits.grad_tensor().values(), want_grad, 1e-14, "cross_entropy grad");

  check_close(ag::cross_entropy(logits, {0, 3, 0, 2}, 0).values(), {2.0338260805261843}, 1e-14,
              "cross_entropy ignore 0");
  check_close(ag::cross_entropy(logits, {1, 3, 4, 0}).values(), {1.3809333259077274}, 1e-14, "cross_entropy");

  // Leading dims are rows: a (2, 2, 5) view of the same logits gives the same loss.
  auto logits3 = Tensor<double>::from({2, 2, 5}, kLogits);
  check_close(ag::cross_entropy(logits3, {1, -1, 4, 0}).values(), {1.4165312137948709}, 1e-14, "3-d logits");

  auto logits32 = to_float(logits);
  auto loss32 = ag::cross_entropy(logits32, {1, -1, 4, 0}, -1);
  check_close(loss32.values(), {1.4165312137948709}, 1e-6, "cross_entropy f32");
  loss32.backward();
  check_close(logits32.grad_tensor().values(), want_grad, 1e-6, "cross_entropy grad f32");
}

BOOST_AUTO_TEST_CASE(cross_entropy_all_ignored_is_zero_with_zero_grad) {
  auto logits = Tensor<double>::from({4, 5}, kLogits, true);
  auto loss = ag::cross_entropy(logits, {-1, -1, -1, -1}, -1);
  BOOST_CHECK_EQUAL(loss.item(), 0.0);
  loss.backward();
  const auto grad = logits.grad_tensor();  // a named tensor: values() of a temporary would dangle here
  for (double g : grad.values()) BOOST_CHECK_EQUAL(g, 0.0);
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradcheck) {
  check_gradients("cross_entropy",
                  [](const auto& in) {
                    return ag::cross_entropy(in[0], {2, -1, 0, 6, -1, 3});
                  },
                  {random_tensor({2, 3, 7}, 41, 2.0)});
}

BOOST_AUTO_TEST_CASE(cross_entropy_rejects_bad_targets) {
  const auto logits = Tensor<double>::from({4, 5}, kLogits);
  std::string e = error_of([&] { ag::cross_entropy(logits, {1, 2, 3}); });
  BOOST_CHECK_MESSAGE(contains(e, "cross_entropy") && contains(e, "3 targets") && contains(e, "[4, 5]"), e);
  e = error_of([&] { ag::cross_entropy(logits, {1, 5, 3, 0}); });
  BOOST_CHECK_MESSAGE(contains(e, "cross_entropy") && contains(e, "target 5") && contains(e, "[4, 5]"), e);
  e = error_of([&] { ag::cross_entropy(logits, {1, -2, 3, 0}, -1); });
  BOOST_CHECK_MESSAGE(contains(e, "cross_entropy") && contains(e, "target -2"), e);
  e = error_of([&] { ag::cross_entropy(Tensor<double>::scalar(1.0), {0}); });
  BOOST_CHECK_MESSAGE(contains(e, "cross_entropy") && contains(e, "[]"), e);
}

// ---- float32 against float64 on random data ----

BOOST_AUTO_TEST_CASE(float32_path_matches_float64) {
  const auto x = random_tensor({3, 4, 9}, 51, 2.0);
  const auto seed = random_tensor({3, 4, 9}, 52).to_vector();
  const std::vector<float> seed32(seed.begin(), seed.end());
  {
    auto x64 = x.detach().set_requires_grad();
    auto x32 = to_float(x);
    auto y64 = ag::softmax(x64);
    auto y32 = ag::softmax(x32);
    check_close(y32.values(), y64.values(), 1e-6, "softmax f32");
    y64.backward(seed);
    y32.backward(seed32);
    check_close(x32.grad_tensor().values(), x64.grad_tensor().values(), 1e-6, "softmax grad f32");
  }
  {
    auto x64 = x.detach().set_requires_grad();
    auto x32 = to_float(x);
    auto y64 = ag::log_softmax(x64);
    auto y32 = ag::log_softmax(x32);
    check_close(y32.values(), y64.values(), 1e-6, "log_softmax f32");
    y64.backward(seed);
    y32.backward(seed32);
    check_close(x32.grad_tensor().values(), x64.grad_tensor().values(), 1e-5, "log_softmax grad f32");
  }
}
