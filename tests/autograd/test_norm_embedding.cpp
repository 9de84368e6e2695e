#include <boost/test/unit_test.hpp>

// layer_norm, rms_norm and embedding: PyTorch reference values (rms_norm's: by hand) and gradients, float64
// gradient checks, the float32 path, repeated ids accumulating, thread-count independence, and the error
// messages.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "common/op_test_helpers.h"

using ag::Shape;
using ag::Tensor;
using testing::check_close;
using testing::check_gradients;
using testing::contains;
using testing::error_of;
using testing::random_tensor;
using testing::to_float;

namespace {

// Made offline with PyTorch 1.13 in float64:
//   x = torch.tensor(kLnX).reshape(2, 3, 4); w = torch.tensor(kLnW); b = torch.tensor(kLnB) (all requiring
//   grad) y = F.layer_norm(x, (4,), w, b, eps=1e-5)                                   -> kLnY
//   y.backward(torch.arange(24, dtype=torch.float64).reshape(2, 3, 4).sin())   -> kLnDx, kLnDw, kLnDb
const std::vector<double> kLnX = {0.1, -0.4, 1.3, 2.0, 0.5,  0.5, -1.0, 3.5, -2.0, 0.0,  1.0, 0.25,
                                  1.0, 1.0,  1.0, 1.5, -0.3, 0.7, -1.6, 0.2, 4.0,  -3.0, 2.0, -1.0};
const std::vector<double> kLnW = {1.0, 0.5, -1.5, 2.0};
const std::vector<double> kLnB = {0.0, 0.1, -0.2, 0.3};
const std::vector<double> kLnY = {
    -0.68420673570725543,  -0.50525980466411058,  -1.0684162414745935, 2.9315643681048282,
    -0.22941530455577358,  -0.014707652277886785, 1.520614784168302,   3.5118142637808307,
    -1.6339582529122292,   0.18451508204718428,   -1.8057865588965012, 1.0888074324403865,
    -0.57728869501260505,  -0.18864434750630252,  0.66593304251890761, 3.7637321700756328,
    -0.058420225012192663, 0.65499213761582975,   2.1660191129938013,  1.351564050219467,
    1.2998664707800371,    -0.54993323539001859,  -1.0356284455014526, -0.81417126066860335};
const std::vector<double> kLnDx = {
    0.0069227868841159786, 0.32132603789445846,   -1.1204650116080495,   0.79221618682947514,
    -0.47185789280908497,  -0.30218823230040848,  0.51602915904434066,   0.25801696606515284,
    0.33805982129692286,   0.24020296159450882,   1.09423089688478,      -1.6724936797762122,
    0.31154653024118062,   3.7598370886416568,    -4.0727907645339592,   0.0014071456511217662,
    -0.56493283741014477,  -0.061197861904200138, 0.13994258204104432,   0.48618811727330064,
    0.17908137751222525,   0.37994233783642906,   -0.045173338139639835, -0.51385037720901461};
const std::vector<double> kLnDw = {0.070335780024214103, -3.1261991588186948, 0.87232495699074963,
                                   2.522774229166699};
const std::vector<double> kLnDb = {0.32102476737758101, 0.59009037886965476, 0.31662961737017636,
                                   -0.24793895412714861};

std::vector<double> sin_seed(size_t n) {
  std::vector<double> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = std::sin(static_cast<double>(i));
  return s;
}

}  // namespace

// ---- layer_norm ----

BOOST_AUTO_TEST_CASE(layer_norm_matches_torch_in_float64) {
  auto x = Tensor<double>::from({2, 3, 4}, kLnX, true);
  auto w = Tensor<double>::from({4}, kLnW, true);
  auto b = Tensor<double>::from({4}, kLnB, true);
  auto y = ag::layer_norm(x, w, b);
  BOOST_CHECK(y.shape() == x.shape());
  check_close(y.values(), kLnY, 1e-13, "layer_norm");
  y.backward(sin_seed(24));
  check_close(x.grad_tensor().values(), kLnDx, 1e-12, "layer_norm dx");
  check_close(w.grad_tensor().values(), kLnDw, 1e-13, "layer_norm dw");
  check_close(b.grad_tensor().values(), kLnDb, 1e-13, "layer_norm db");
}

BOOST_AUTO_TEST_CASE(layer_norm_matches_torch_in_float32) {
  auto x = to_float(Tensor<double>::from({2, 3, 4}, kLnX));
  auto w = to_float(Tensor<double>::from({4}, kLnW));
  auto b = to_float(Tensor<double>::from({4}, kLnB));
  auto y = ag::layer_norm(x, w, b);
  check_close(y.values(), kLnY, 1e-5, "layer_norm f32");
  const auto seed = sin_seed(24);
  y.backward(std::vector<float>(seed.begin(), seed.end()));
  check_close(x.grad_tensor().values(), kLnDx, 1e-4, "layer_norm dx f32");
  check_close(w.grad_tensor().values(), kLnDw, 1e-5, "layer_norm dw f32");
  check_close(b.grad_tensor().values(), kLnDb, 1e-5, "layer_norm db f32");
}

BOOST_AUTO_TEST_CASE(layer_norm_gradcheck) {
  auto f = [](const auto& in) { return ag::layer_norm(in[0], in[1], in[2]); };
  check_gradients("layer_norm (x, weight, bias)", f,
                  {random_tensor({3, 2, 5}, 61, 2.0, 0.5), random_tensor({5}, 62), random_tensor({5}, 63)});
  // Each input alone: the closure must skip the inputs that do not require grad.
  for (int only = 0; only < 3; ++only) {
    std::vector<Tensor<double>> in = {random_tensor({4, 6}, 64), random_tensor({6}, 65),
                                      random_tensor({6}, 66)};
    for (int k = 0; k < 3; ++k) in[k].set_requires_grad(k == only);
    check_gradients("layer_norm input " + std::to_string(only) + " only", f, in);
  }
}

BOOST_AUTO_TEST_CASE(rms_norm_values_and_gradcheck) {
  // One row [3, 4]: mean(x^2) = 12.5, so y = x / sqrt(12.5 + eps) * w; no centring, no bias.
  const Tensor<double> x = Tensor<double>::from({1, 2}, {3, 4}), w = Tensor<double>::from({2}, {2, -1});
  const double r = 1 / std::sqrt(12.5 + 1e-5);
  check_close(ag::rms_norm(x, w).values(), {3 * r * 2, -4 * r}, 1e-15, "rms_norm values");
  const double r6 = 1 / std::sqrt(12.5 + 1e-6);
  check_close(ag::rms_norm(x, w, 1e-6).values(), {3 * r6 * 2, -4 * r6}, 1e-15, "rms_norm eps 1e-6");
  auto f = [](const auto& in) { return ag::rms_norm(in[0], in[1]); };
  check_gradients("rms_norm (x, weight)", f,
                  {random_tensor({3, 2, 5}, 81, 2.0, 0.5), random_tensor({5}, 82)});
  // Each input alone: the closure must skip the input that does not require grad.
  for (int only = 0; only < 2; ++only) {
    std::vector<Tensor<double>> in = {random_tensor({4, 6}, 83), random_tensor({6}, 84)};
    for (int k = 0; k < 2; ++k) in[k].set_requires_grad(k == only);
    check_gradients("rms_norm input " + std::to_string(only) + " only", f, in);
  }
}

BOOST_AUTO_TEST_CASE(rms_norm_is_the_composed_ops_and_thread_independent) {
  // The fused op against x * rsqrt(mean(x^2) + eps) * w, values and gradients, on 300 x 256 (past the
  // pool's parallel threshold); each row belongs to one thread and dw sums rows in order.
  auto x = random_tensor({300, 256}, 85, 2.0);
  auto w = random_tensor({256}, 86);
  const auto seed = random_tensor({300, 256}, 87).to_vector();
  auto run = [&](int threads, bool composed) {
    const int saved = ag::num_threads();
    ag::set_num_threads(threads);
    for (auto* t : {&x, &w}) t->zero_grad();
    auto y =
        composed ? x * ag::rsqrt(ag::add_scalar(ag::mean(x * x, -1, true), 1e-5)) * w : ag::rms_norm(x, w);
    y.backward(seed);
    ag::set_num_threads(saved);
    return std::vector<std::vector<double>>{y.to_vector(), x.grad_tensor().to_vector(),
                                            w.grad_tensor().to_vector()};
  };
  const auto one = run(1, false);
  BOOST_CHECK(one == run(2, false));
  BOOST_CHECK(one == run(3, false));
  const auto composed = run(1, true);
  for (size_t i = 0; i < one.size(); ++i) check_close(one[i], composed[i], 1e-12, "rms_norm vs composed");
}

BOOST_AUTO_TEST_CASE(rms_norm_rejects_bad_arguments) {
  const auto x = random_tensor({2, 4}, 88);
  std::string e = error_of([&] { ag::rms_norm(x, random_tensor({3}, 89)); });
  BOOST_CHECK_MESSAGE(contains(e, "rms_norm") && contains(e, "[2, 4]") && contains(e, "[3]"), e);
  e = error_of([&] { ag::rms_norm(x, random_tensor({4}, 90), 0.0); });
  BOOST_CHECK_MESSAGE(contains(e, "rms_norm") && contains(e, "eps"), e);
}

BOOST_AUTO_TEST_CASE(layer_norm_constant_row_gives_bias) {
  // Zero variance: eps keeps 1/std finite and the normalised row is exactly 0.
  auto x = Tensor<double>::from({1, 3}, {2.5, 2.5, 2.5}, true);
  auto w = Tensor<double>::from({3}, {1.0, 2.0, 3.0}, true);
  auto b = Tensor<double>::from({3}, {0.1, 0.2, 0.3}, true);
  auto y = ag::layer_norm(x, w, b);
  check_close(y.values(), {0.1, 0.2, 0.3}, 0.0, "layer_norm constant row");
  y.backward({1.0, -1.0, 0.5});
  const auto dx = x.grad_tensor().values();
  for (double g : dx) BOOST_CHECK(std::isfinite(g));
}

BOOST_AUTO_TEST_CASE(layer_norm_threads_do_not_change_results) {
  // 300 x 256 crosses the pool's parallel threshold; each row belongs to one thread, and the parameter
  // gradients are summed in blocks of 128 rows (the last one short) that are added in order, so the
  // thread count cannot change a bit.
  auto x = random_tensor({300, 256}, 67, 2.0);
  auto w = random_tensor({256}, 68);
  auto b = random_tensor({256}, 69);
  const auto seed = random_tensor({300, 256}, 70).to_vector();
  auto run = [&](int threads) {
    const int saved = ag::num_threads();
    ag::set_num_threads(threads);
    for (auto* t : {&x, &w, &b}) t->zero_grad();
    auto y = ag::layer_norm(x, w, b);
    y.backward(seed);
    ag::set_num_threads(saved);
    return std::vector<std::vector<double>>{y.to_vector(), x.grad_tensor().to_vector(),
                                            w.grad_tensor().to_vector(), b.grad_tensor().to_vector()};
  };
  const auto one = run(1);
  BOOST_CHECK(one == run(2));
  BOOST_CHECK(one == run(3));
}

BOOST_AUTO_TEST_CASE(layer_norm_rejects_wrong_parameter_shapes) {
  const auto x = random_tensor({2, 4}, 71);
  std::string e = error_of([&] { ag::layer_norm(x, random_tensor({3}, 72), random_tensor({4}, 73)); });
  BOOST_CHECK_MESSAGE(contains(e, "layer_norm") && contains(e, "[2, 4]") && contains(e, "[3]"), e);
  e = error_of([&] { ag::layer_norm(x, random_tensor({4}, 74), random_tensor({1, 4}, 75)); });
  BOOST_CHECK_MESSAGE(contains(e, "layer_norm") && contains(e, "[2, 4]") && contains(e, "[1, 4]"), e);
  e = error_of(
      [&] { ag::layer_norm(Tensor<double>::scalar(1.0), random_tensor({1}, 76), random_tensor({1}, 77)); });
  BOOST_CHECK_MESSAGE(contains(e, "layer_norm") && contains(e, "[]"), e);
}

// ---- embedding ----

BOOST_AUTO_TEST_CASE(embedding_picks_rows_in_ids_shape) {
  auto w = Tensor<double>::from({4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  auto y = ag::embedding(w, {2, 0, 3, 2}, {2, 2});
  BOOST_CHECK(y.shape() == (Shape{2, 2, 3}));
  check_close(y.values(), {20, 21, 22, 0, 1, 2, 30, 31, 32, 20, 21, 22}, 0.0, "embedding");
  auto yf = ag::embedding(to_float(w, false), {2, 0, 3, 2}, {2, 2});
  check_close(yf.values(), y.values(), 0.0, "embedding f32");
}

BOOST_AUTO_TEST_CASE(embedding_repeated_id_accumulates_grad) {
  auto w = Tensor<double>::zeros({4, 2}, true);
  auto y = ag::embedding(w, {1, 3, 1, 1}, {4});
  y.backward({1, 2, 3, 4, 5, 6, 7, 8});
  // Row 1 is picked three times (positions 0, 2, 3): (1 + 5 + 7, 2 + 6 + 8); row 3 once; rows 0 and 2 never.
  check_close(w.grad_tensor().values(), {0, 0, 13, 16, 0, 0, 3, 4}, 0.0, "embedding grad");

  auto wf = Tensor<float>::zeros({4, 2}, true);
  ag::embedding(wf, {1, 3, 1, 1}, {4}).backward({1, 2, 3, 4, 5, 6, 7, 8});
  check_close(wf.grad_tensor().values(), {0, 0, 13, 16, 0, 0, 3, 4}, 0.0, "embedding grad f32");
}

BOOST_AUTO_TEST_CASE(embedding_gradcheck) {
  check_gradients("embedding",
                  [](const auto& in) {
                    return ag::embedding(in[0], {4, 0, 4, 2, 1, 4}, {2, 3});
                  },
                  {random_tensor({5, 3}, 81)});
}

BOOST_AUTO_TEST_CASE(embedding_rejects_bad_ids_and_shapes) {
  const auto w = random_tensor({4, 3}, 82);
  std::string e = error_of([&] { ag::embedding(w, {0, 4}, {2}); });
  BOOST_CHECK_MESSAGE(contains(e, "embedding") && contains(e, "id 4") && contains(e, "V = 4"), e);
  e = error_of([&] { ag::embedding(w, {-1}, {1}); });
  BOOST_CHECK_MESSAGE(contains(e, "embedding") && contains(e, "id -1") && contains(e, "V = 4"), e);
  e = error_of([&] { ag::embedding(w, {0, 1, 2}, {2, 2}); });
  BOOST_CHECK_MESSAGE(contains(e, "embedding") && contains(e, "3 ids") && contains(e, "[2, 2]"), e);
  e = error_of([&] { ag::embedding(random_tensor({12}, 83), {0}, {1}); });
  BOOST_CHECK_MESSAGE(contains(e, "embedding") && contains(e, "[12]"), e);
}
