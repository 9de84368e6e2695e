#include <boost/test/unit_test.hpp>

// gelu_linear, layer_norm_linear, and linear and gelu_linear with a residual: float64 gradient checks, the
// same values and gradients as the composed ops they replace (linear(gelu(h)), linear(layer_norm(x)),
// add(residual, ...); to 1e-12 in float64, 1e-6 in float32), the same bits for 1 and 2 threads, and graphs
// that hold neither GELU's nor the LayerNorm's output, nor the projection's output apart from the sum.
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "common/op_test_helpers.h"

using ag::Tensor;
using testing::check_gradients;
using testing::random_tensor;
using Inputs = std::vector<Tensor<double>>;

namespace {

// Values and every input's gradient (under a fixed random seed gradient) of f at fresh copies of inputs.
template <typename T>
std::vector<std::vector<T>> run(const std::function<Tensor<T>(const std::vector<Tensor<T>>&)>& f,
                                const std::vector<Tensor<T>>& inputs) {
  std::vector<Tensor<T>> in;
  for (const Tensor<T>& t : inputs)
    in.push_back(Tensor<T>::from(t.shape(), t.to_vector(), true).set_requires_grad(t.requires_grad()));
  Tensor<T> y = f(in);
  const Tensor<double> seed = random_tensor(y.shape(), 99, 1.0, 0.0, false);
  y.backward(std::vector<T>(seed.values().begin(), seed.values().end()));
  std::vector<std::vector<T>> out{y.to_vector()};
  for (const Tensor<T>& t : in)
    out.push_back(t.requires_grad() ? t.grad_tensor().to_vector() : std::vector<T>{});
  return out;
}

// f's values and gradients on 1 and on 2 threads are the same bits.
void check_same_bits_for_one_and_two_threads(
    const std::function<Tensor<float>(const std::vector<Tensor<float>>&)>& f, const Inputs& inputs) {
  std::vector<Tensor<float>> in;
  for (const Tensor<double>& t : inputs) in.push_back(testing::to_float(t));
  ag::set_num_threads(1);
  const auto one = run<float>(f, in);
  ag::set_num_threads(2);
  const auto two = run<float>(f, in);
  ag::set_num_threads(1);
  BOOST_TEST((one == two));
}

template <typename T>
Tensor<T> composed(const std::vector<Tensor<T>>& x) {
  return ag::linear(ag::gelu(x[0]), x[1], x.size() > 2 ? x[2] : Tensor<T>());
}
template <typename T>
Tensor<T> fused(const std::vector<Tensor<T>>& x) {
  return ag::gelu_linear(x[0], x[1], x.size() > 2 ? x[2] : Tensor<T>());
}

// With a residual, as one op and as the add after it.
template <typename T>
Tensor<T> linear_residual(const std::vector<Tensor<T>>& x) {
  return ag::linear(x[0], x[1], x.size() > 3 ? x[2] : Tensor<T>(), x.back());
}
template <typename T>
Tensor<T> linear_then_add(const std::vector<Tensor<T>>& x) {
  return ag::add(x.back(), ag::linear(x[0], x[1], x.size() > 3 ? x[2] : Tensor<T>()));
}
template <typename T>
Tensor<T> gelu_linear_residual(const std::vector<Tensor<T>>& x) {
  return ag::gelu_linear(x[0], x[1], x.size() > 3 ? x[2] : Tensor<T>(), x.back());
}
template <typename T>
Tensor<T> gelu_linear_then_add(const std::vector<Tensor<T>>& x) {
  return ag::add(x.back(), ag::linear(ag::gelu(x[0]), x[1], x.size() > 3 ? x[2] : Tensor<T>()));
}

// x, ln_weight, ln_bias, weight[, bias]
template <typename T>
Tensor<T> ln_linear(const std::vector<Tensor<T>>& x) {
  return ag::layer_norm_linear(x[0], x[1], x[2], x[3], x.size() > 4 ? x[4] : Tensor<T>());
}
template <typename T>
Tensor<T> ln_then_linear(const std::vector<Tensor<T>>& x) {
  return ag::linear(ag::layer_norm(x[0], x[1], x[2]), x[3], x.size() > 4 ? x[4] : Tensor<T>());
}
// LayerNorm parameters near their initial values (ones, zeros), as a model has them.
Inputs ln_inputs(int64_t rows, int64_t in, int64_t out, uint64_t seed, bool bias = true) {
  Inputs x = {random_tensor({rows, in}, seed, 2.0, 0.5), random_tensor({in}, seed + 1, 0.3, 1.0),
              random_tensor({in}, seed + 2, 0.3), random_tensor({out, in}, seed + 3)};
  if (bias) x.push_back(random_tensor({out}, seed + 4));
  return x;
}

void check_same(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                double tol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    testing::check_close(got[k], want[k], tol,
                         what + (k == 0 ? " value" : " grad of input " + std::to_string(k - 1)));
}

}  // namespace

BOOST_AUTO_TEST_CASE(gradcheck_with_and_without_bias) {
  check_gradients("gelu_linear", fused<double>,
                  {random_tensor({2, 3, 4}, 1, 1.5), random_tensor({5, 4}, 2), random_tensor({5}, 3)}, 1e-7);
  check_gradients("gelu_linear without bias", fused<double>,
                  {random_tensor({3, 4}, 4, 1.5), random_tensor({2, 4}, 5)}, 1e-7);
}

// h also feeds another op, whose gradient reaches h first: dh is added, not assigned.
template <typename T>
Tensor<T> fused_plus_h_squared(const std::vector<Tensor<T>>& x) {
  return ag::add(ag::sum(fused<T>(x)), ag::sum(ag::mul(x[0], x[0])));
}
template <typename T>
Tensor<T> composed_plus_h_squared(const std::vector<Tensor<T>>& x) {
  return ag::add(ag::sum(composed<T>(x)), ag::sum(ag::mul(x[0], x[0])));
}

BOOST_AUTO_TEST_CASE(gradcheck_when_h_already_has_a_gradient) {
  check_gradients("gelu_linear + h^2", fused_plus_h_squared<double>,
                  {random_tensor({30, 3}, 9, 1.5), random_tensor({2, 3}, 10), random_tensor({2}, 11)}, 1e-7);
}

BOOST_AUTO_TEST_CASE(equals_the_composed_ops_in_float64) {
  for (int64_t rows : {1, 37, 700}) {
    const Inputs in = {random_tensor({rows, 24}, 20, 1.5), random_tensor({16, 24}, 21),
                       random_tensor({16}, 22)};
    check_same(run<double>(fused<double>, in), run<double>(composed<double>, in), 1e-12,
               "rows " + std::to_string(rows));
    const Inputs no_bias = {in[0], in[1]};
    check_same(run<double>(fused<double>, no_bias), run<double>(composed<double>, no_bias), 1e-12,
               "no bias, rows " + std::to_string(rows));
  }
  const Inputs twice = {random_tensor({700, 24}, 29, 1.5), random_tensor({16, 24}, 21),
                        random_tensor({16}, 22)};
  check_same(run<double>(fused_plus_h_squared<double>, twice),
             run<double>(composed_plus_h_squared<double>, twice), 1e-12, "h used twice");
  // Only some inputs need a gradient.
  Inputs frozen = {random_tensor({40, 8}, 23, 1.5), random_tensor({6, 8}, 24, 1.0, 0.0, false),
                   random_tensor({6}, 25)};
  check_same(run<double>(fused<double>, frozen), run<double>(composed<double>, frozen), 1e-12, "frozen W");
  frozen = {random_tensor({40, 8}, 26, 1.5, 0.0, false), random_tensor({6, 8}, 27), random_tensor({6}, 28)};
  check_same(run<double>(fused<double>, frozen), run<double>(composed<double>, frozen), 1e-12, "frozen h");
}

BOOST_AUTO_TEST_CASE(equals_the_composed_ops_in_float32) {
  const Inputs in = {random_tensor({2, 300, 64}, 30, 1.5), random_tensor({32, 64}, 31),
                     random_tensor({32}, 32)};
  std::vector<Tensor<float>> f;
  for (const Tensor<double>& t : in) f.push_back(testing::to_float(t));
  const auto got = run<float>(fused<float>, f), want = run<float>(composed<float>, f);
  for (size_t k = 0; k < got.size(); ++k)
    testing::check_close(got[k], std::vector<double>(want[k].begin(), want[k].end()), 1e-6,
                         "float32 " + std::to_string(k));
}

BOOST_AUTO_TEST_CASE(same_bits_for_one_and_two_threads) {
  // d_ff 2048: blocks of 512 rows (see blocks_of_rows_add_up_to_the_composed_ops).
  check_same_bits_for_one_and_two_threads(
      fused<float>,
      {random_tensor({1100, 2048}, 40, 1.5), random_tensor({64, 2048}, 41), random_tensor({64}, 42)});
}

BOOST_AUTO_TEST_CASE(the_graph_holds_no_gelu_output) {
  const int64_t rows = 600, d_ff = 64, d = 16;
  Tensor<float> h = testing::to_float(random_tensor({rows, d_ff}, 50));
  Tensor<float> w = testing::to_float(random_tensor({d, d_ff}, 51)),
                b = testing::to_float(random_tensor({d}, 52));
  const int64_t out_bytes = rows * d * int64_t(sizeof(float)),
                gelu_bytes = rows * d_ff * int64_t(sizeof(float));
  int64_t before = ag::detail::storage_live_bytes();
  {
    const Tensor<float> y = ag::linear(ag::gelu(h), w, b);
    BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes + gelu_bytes);  // the composed path
  }
  before = ag::detail::storage_live_bytes();
  Tensor<float> y = ag::gelu_linear(h, w, b);
  BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes);  // the output only: its scratch is gone
  ag::sum(y).backward();
  BOOST_TEST(h.has_grad());
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_errors_naming_the_op) {
  const Tensor<double> h = random_tensor({3, 4}, 60), w = random_tensor({5, 4}, 61);
  BOOST_TEST(testing::contains(testing::error_of([&] {
                                 ag::gelu_linear(h, random_tensor({5, 3}, 62), Tensor<double>());
                               }),
                               "gelu_linear: shapes [3, 4] and [5, 3]"));
  BOOST_TEST(testing::contains(testing::error_of([&] { ag::gelu_linear(h, w, random_tensor({4}, 63)); }),
                               "gelu_linear: shapes [5, 4] and [4]: bias must be (out)"));
}

BOOST_AUTO_TEST_CASE(gradcheck_with_a_residual) {
  check_gradients("linear + residual", linear_residual<double>,
                  {random_tensor({2, 3, 4}, 70), random_tensor({5, 4}, 71), random_tensor({5}, 72),
                   random_tensor({2, 3, 5}, 73)},
                  1e-7);
  check_gradients("linear + residual, no bias", linear_residual<double>,
                  {random_tensor({3, 4}, 74), random_tensor({2, 4}, 75), random_tensor({3, 2}, 76)}, 1e-7);
  check_gradients("gelu_linear + residual", gelu_linear_residual<double>,
                  {random_tensor({2, 3, 4}, 77, 1.5), random_tensor({5, 4}, 78), random_tensor({5}, 79),
                   random_tensor({2, 3, 5}, 80)},
                  1e-7);
  check_gradients("gelu_linear + residual, no bias", gelu_linear_residual<double>,
                  {random_tensor({3, 4}, 81, 1.5), random_tensor({2, 4}, 82), random_tensor({3, 2}, 83)},
                  1e-7);
  // The residual is x itself (a square weight): x's gradient is dy W + dy.
  check_gradients(
      "linear + x", [](const Inputs& x) { return ag::linear(x[0], x[1], x[2], x[0]); },
      {random_tensor({3, 4}, 84), random_tensor({4, 4}, 85), random_tensor({4}, 86)}, 1e-7);
  check_gradients(
      "gelu_linear + h", [](const Inputs& x) { return ag::gelu_linear(x[0], x[1], x[2], x[0]); },
      {random_tensor({3, 4}, 87, 1.5), random_tensor({4, 4}, 88), random_tensor({4}, 89)}, 1e-7);
}

BOOST_AUTO_TEST_CASE(a_residual_equals_the_add_after_the_op) {
  for (int64_t rows : {1, 37, 700}) {
    const Inputs in = {random_tensor({rows, 24}, 90, 1.5), random_tensor({16, 24}, 91),
                       random_tensor({16}, 92), random_tensor({rows, 16}, 93)};
    const std::string r = ", rows " + std::to_string(rows);
    check_same(run<double>(linear_residual<double>, in), run<double>(linear_then_add<double>, in), 1e-12,
               "linear + residual" + r);
    check_same(run<double>(gelu_linear_residual<double>, in), run<double>(gelu_linear_then_add<double>, in),
               1e-12, "gelu_linear + residual" + r);
    const Inputs no_bias = {in[0], in[1], in[3]};
    check_same(run<double>(linear_residual<double>, no_bias), run<double>(linear_then_add<double>, no_bias),
               1e-12, "linear + residual, no bias" + r);
    check_same(run<double>(gelu_linear_residual<double>, no_bias),
               run<double>(gelu_linear_then_add<double>, no_bias), 1e-12,
               "gelu_linear + residual, no bias" + r);
  }
  // A residual that needs no gradient, with x and W that do.
  const Inputs frozen = {random_tensor({9, 8}, 94), random_tensor({6, 8}, 95), random_tensor({6}, 96),
                         random_tensor({9, 6}, 97, 1.0, 0.0, false)};
  check_same(run<double>(linear_residual<double>, frozen), run<double>(linear_then_add<double>, frozen),
             1e-12, "frozen residual");
  // In float32, to the rounding of the add's different place.
  std::vector<Tensor<float>> f;
  for (const Tensor<double>& t : {random_tensor({2, 300, 64}, 98, 1.5), random_tensor({32, 64}, 99),
                                  random_tensor({32}, 100), random_tensor({2, 300, 32}, 101)})
    f.push_back(testing::to_float(t));
  for (auto [a, b] : {std::pair{&linear_residual<float>, &linear_then_add<float>},
                      std::pair{&gelu_linear_residual<float>, &gelu_linear_then_add<float>}}) {
    const auto got = run<float>(a, f), want = run<float>(b, f);
    for (size_t k = 0; k < got.size(); ++k)
      testing::check_close(got[k], std::vector<double>(want[k].begin(), want[k].end()), 1e-6,
                           "float32 " + std::to_string(k));
  }
}

BOOST_AUTO_TEST_CASE(with_a_residual_the_graph_holds_only_the_sum) {
  const int64_t rows = 600, in = 64, d = 16, out_bytes = rows * d * int64_t(sizeof(float));
  Tensor<float> x = testing::to_float(random_tensor({rows, in}, 110));
  Tensor<float> w = testing::to_float(random_tensor({d, in}, 111)),
                b = testing::to_float(random_tensor({d}, 112));
  Tensor<float> r = testing::to_float(random_tensor({rows, d}, 113));
  int64_t before = ag::detail::storage_live_bytes();
  {
    const Tensor<float> y = ag::add(r, ag::linear(x, w, b));
    BOOST_TEST(ag::detail::storage_live_bytes() - before == 2 * out_bytes);  // the product and the sum
  }
  before = ag::detail::storage_live_bytes();
  {
    const Tensor<float> y = ag::linear(x, w, b, r);
    BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes);
  }
  before = ag::detail::storage_live_bytes();
  const Tensor<float> y = ag::gelu_linear(x, w, b, r);
  BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes);
}

BOOST_AUTO_TEST_CASE(a_residual_of_the_wrong_shape_is_an_error) {
  const Tensor<double> x = random_tensor({3, 4}, 120), w = random_tensor({5, 4}, 121);
  for (const char* op : {"linear", "gelu_linear"}) {
    const std::string e = testing::error_of([&] {
      const Tensor<double> r = random_tensor({3, 4}, 122);
      if (std::string(op) == "linear")
        ag::linear(x, w, Tensor<double>(), r);
      else
        ag::gelu_linear(x, w, Tensor<double>(), r);
    });
    BOOST_TEST(testing::contains(
                   e, std::string(op) + ": residual of shape [3, 4] does not match the output's [3, 5]"),
               e);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_layer_norm_linear) {
  check_gradients("layer_norm_linear", ln_linear<double>, ln_inputs(6, 5, 3, 130), 1e-7);
  check_gradients("layer_norm_linear without bias", ln_linear<double>, ln_inputs(4, 6, 2, 136, false), 1e-7);
  // x also feeds another op first: dx is added, not assigned.
  check_gradients(
      "layer_norm_linear + x^2",
      [](const Inputs& x) { return ag::add(ag::sum(ln_linear<double>(x)), ag::sum(ag::mul(x[0], x[0]))); },
      ln_inputs(7, 4, 3, 148), 1e-7);
}

BOOST_AUTO_TEST_CASE(layer_norm_linear_equals_the_composed_ops) {
  for (int64_t rows : {1, 37, 700}) {
    const std::string r = ", rows " + std::to_string(rows);
    const Inputs in = ln_inputs(rows, 24, 16, 150);
    check_same(run<double>(ln_linear<double>, in), run<double>(ln_then_linear<double>, in), 1e-12,
               "float64" + r);
    const Inputs no_bias(in.begin(), in.begin() + 4);
    check_same(run<double>(ln_linear<double>, no_bias), run<double>(ln_then_linear<double>, no_bias), 1e-12,
               "float64 without bias" + r);
  }
  Inputs frozen = ln_inputs(40, 8, 6, 160);  // only some inputs need a gradient
  frozen[1].set_requires_grad(false);
  frozen[3].set_requires_grad(false);
  check_same(run<double>(ln_linear<double>, frozen), run<double>(ln_then_linear<double>, frozen), 1e-12,
             "frozen");
  frozen = ln_inputs(40, 8, 6, 166);
  frozen[0].set_requires_grad(false);
  check_same(run<double>(ln_linear<double>, frozen), run<double>(ln_then_linear<double>, frozen), 1e-12,
             "frozen x");

  std::vector<Tensor<float>> f;
  for (const Tensor<double>& t : ln_inputs(600, 64, 32, 170)) f.push_back(testing::to_float(t));
  const auto got = run<float>(ln_linear<float>, f), want = run<float>(ln_then_linear<float>, f);
  for (size_t k = 0; k < got.size(); ++k)
    testing::check_close(got[k], std::vector<double>(want[k].begin(), want[k].end()), 1e-6,
                         "float32 " + std::to_string(k));
}

BOOST_AUTO_TEST_CASE(layer_norm_linear_same_bits_for_one_and_two_threads) {
  // 1024 wide: blocks of 1024 rows for the GEMMs, of 128 for the LayerNorm parameters' gradients.
  check_same_bits_for_one_and_two_threads(ln_linear<float>, ln_inputs(1100, 1024, 64, 180));
}

BOOST_AUTO_TEST_CASE(layer_norm_linear_holds_no_layer_norm_output) {
  std::vector<Tensor<float>> f;
  for (const Tensor<double>& t : ln_inputs(600, 64, 16, 190)) f.push_back(testing::to_float(t));
  const int64_t out_bytes = 600 * 16 * int64_t(sizeof(float)), ln_bytes = 600 * 64 * int64_t(sizeof(float));
  int64_t before = ag::detail::storage_live_bytes();
  {
    const Tensor<float> y = ln_then_linear<float>(f);
    BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes + ln_bytes);
  }
  before = ag::detail::storage_live_bytes();
  const Tensor<float> y = ln_linear<float>(f);
  BOOST_TEST(ag::detail::storage_live_bytes() - before == out_bytes);
}

BOOST_AUTO_TEST_CASE(layer_norm_linear_bad_arguments_are_errors_naming_it) {
  const Inputs in = ln_inputs(3, 4, 2, 200);
  BOOST_TEST(testing::contains(
      testing::error_of([&] { ag::layer_norm_linear(in[0], random_tensor({3}, 201), in[2], in[3], in[4]); }),
      "layer_norm_linear: x of shape [3, 4] needs weight and bias of shape [4]"));
  BOOST_TEST(
      testing::contains(testing::error_of([&] {
                          ag::layer_norm_linear(in[0], in[1], in[2], random_tensor({2, 3}, 202), in[4]);
                        }),
                        "layer_norm_linear: shapes [3, 4] and [2, 3]"));
  BOOST_TEST(testing::contains(
      testing::error_of([&] { ag::layer_norm_linear(in[0], in[1], in[2], in[3], in[4], 0.0); }),
      "layer_norm_linear: eps must be positive"));
}

BOOST_AUTO_TEST_CASE(blocks_of_rows_add_up_to_the_composed_ops) {
  // The fused ops work on blocks of rows that fit 4 MB of scratch, in multiples of 512 rows: 1024 float64
  // columns take 512 rows at a time, so 1100 rows are three blocks, and dW sums the blocks' shares (the
  // gradient checks above run on one block; these compare with the gradient-checked composed ops).
  const Inputs in = {random_tensor({1100, 1024}, 210, 1.5), random_tensor({4, 1024}, 211, 0.05),
                     random_tensor({4}, 212)};
  check_same(run<double>(fused<double>, in), run<double>(composed<double>, in), 1e-12, "gelu_linear, blocks");
  check_same(run<double>(fused_plus_h_squared<double>, in), run<double>(composed_plus_h_squared<double>, in),
             1e-12, "gelu_linear with h used twice, blocks");
  const Inputs with_residual = {in[0], in[1], in[2], random_tensor({1100, 4}, 213)};
  check_same(run<double>(gelu_linear_residual<double>, with_residual),
             run<double>(gelu_linear_then_add<double>, with_residual), 1e-12,
             "gelu_linear + residual, blocks");
  const Inputs ln = ln_inputs(1100, 1024, 4, 214);
  check_same(run<double>(ln_linear<double>, ln), run<double>(ln_then_linear<double>, ln), 1e-12,
             "layer_norm_linear, blocks");
}
