#include <boost/test/unit_test.hpp>

// The fused attention op (ag::attention) against the composed path it replaces (split heads, then
// nn::scaled_dot_product_attention's matmul, scale, masked_fill, softmax, matmul, then merge heads):
// values and gradients, with causal, padding (including a fully masked row), no mask and masks of every
// shape of visible keys across the op's blocks of query rows; its float64 gradient check; weights
// recomputed in backward (large ones) against the composed path too, and what the graph keeps;
// MultiHeadAttention's fused and hooked (composed) paths; and thread-count independence.
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "common/random_tensor.h"
#include "nn/attention.h"

using ag::Tensor;

namespace {

template <typename T>
Tensor<T> composed(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, int64_t H,
                   const Tensor<T>& mask) {
  const int64_t B = q.size(0), t = q.size(1), s = k.size(1), D = q.size(2), dk = D / H;
  // k and v may have fewer heads (grouped-query attention): each repeated for its query heads.
  auto split = [&](const Tensor<T>& y, int64_t len) {
    return ag::permute(nn::repeat_kv_heads(ag::reshape(y, {B, len, y.size(2) / dk, dk}), H), {0, 2, 1, 3});
  };
  const nn::AttentionResult<T> r =
      nn::scaled_dot_product_attention(split(q, t), split(k, s), split(v, s), mask);
  return ag::reshape(ag::permute(r.output, {0, 2, 1, 3}), {B, t, D});
}

template <typename T>
Tensor<T> fused(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, int64_t H,
                const Tensor<T>& mask) {
  return ag::attention(q, k, v, H, mask, T(1) / std::sqrt(T(q.size(2) / H)));
}

// Causal plus padding, with batch entry 1's first key padded: its query 0 may look nowhere.
Tensor<double> causal_padding_mask(int64_t B, int64_t t) {
  std::vector<uint8_t> pad(static_cast<size_t>(B * t), 0);
  pad[static_cast<size_t>(t)] = 1;
  pad[static_cast<size_t>(2 * t - 1)] = 1;
  return ag::add(nn::causal_mask<double>(t), nn::padding_mask<double>(pad, B, t));
}

template <typename T>
Tensor<T> cast(const Tensor<double>& x, bool requires_grad) {
  return Tensor<T>::from(x.shape(), std::vector<T>(x.values().begin(), x.values().end()), requires_grad);
}

// Forward values and the gradients of sum(w * out) for both paths; the largest absolute difference.
// s keys (t when negative); kv key and value heads (H when 0).
template <typename T>
double max_difference(const Tensor<double>& mask64, uint64_t seed, int64_t B = 2, int64_t t = 5,
                      int64_t D = 12, int64_t H = 3, int64_t s = -1, int64_t kv = 0) {
  if (s < 0) s = t;
  const int64_t Dkv = (kv ? kv : H) * (D / H);
  const Tensor<double> q0 = testing::random_tensor({B, t, D}, seed),
                       k0 = testing::random_tensor({B, s, Dkv}, seed + 1),
                       v0 = testing::random_tensor({B, s, Dkv}, seed + 2),
                       w0 = testing::random_tensor({B, t, D}, seed + 3, 1.0, 0.0, false);
  const Tensor<T> mask = mask64.defined() ? cast<T>(mask64, false) : Tensor<T>();
  double worst = 0;
  std::vector<std::vector<T>> results[2];
  for (int path = 0; path < 2; ++path) {
    Tensor<T> q = cast<T>(q0, true), k = cast<T>(k0, true), v = cast<T>(v0, true), w = cast<T>(w0, false);
    Tensor<T> out = path == 0 ? composed(q, k, v, H, mask) : fused(q, k, v, H, mask);
    for (T x : out.values()) BOOST_REQUIRE(std::isfinite(double(x)));
    results[path] = {out.to_vector()};
    ag::sum(ag::mul(out, w)).backward();
    for (Tensor<T>* x : {&q, &k, &v})
      results[path].push_back(std::vector<T>(x->grad(), x->grad() + x->numel()));
  }
  for (size_t i = 0; i < results[0].size(); ++i)
    for (size_t j = 0; j < results[0][i].size(); ++j)
      worst = std::max(worst, std::abs(double(results[0][i][j]) - double(results[1][i][j])));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fused_matches_composed_in_float64_and_float32) {
  const int64_t B = 2, t = 5;
  const Tensor<double> masks[] = {Tensor<double>(), nn::causal_mask<double>(t), causal_padding_mask(B, t)};
  for (const Tensor<double>& m : masks) {
    BOOST_TEST(max_difference<double>(m, 11) < 1e-12);
    BOOST_TEST(max_difference<float>(m, 21) < 1e-5);
  }
}

// A mask of shape `shape` (last two dims t and s) with entry (.., i, j) = masked(index of the slab, i, j).
template <typename F>
Tensor<double> mask_from(const ag::Shape& shape, F masked) {
  const int64_t t = shape[shape.size() - 2], s = shape.back();
  int64_t slabs = 1;
  for (size_t d = 0; d + 2 < shape.size(); ++d) slabs *= shape[d];
  std::vector<double> m;
  for (int64_t n = 0; n < slabs; ++n)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < s; ++j) m.push_back(masked(n, i, j) ? 1.0 : 0.0);
  return Tensor<double>::from(shape, m);
}

BOOST_AUTO_TEST_CASE(row_blocks_skip_only_keys_no_query_of_the_block_sees) {
  // The fused op takes query rows 16 at a time and multiplies only over the keys up to the last one a row
  // of the block sees (and, for dk and dv, only over the query rows that see a key block). 37 queries make
  // blocks of 16, 16 and 5; the masks below give each kind of visible set: prefixes that grow (causal),
  // none (a fully masked row), a window, keys visible only after the query (growing starts, no end),
  // per-head and per-batch masks whose rows end anywhere, and cross-attention with 23 and 50 keys.
  const int64_t B = 2, t = 37, D = 8, H = 2;
  const Tensor<double> masks[] = {
      nn::causal_mask<double>(t),
      causal_padding_mask(B, t),
      mask_from({t, t}, [](int64_t, int64_t i, int64_t j) { return j > i || j + 5 <= i; }),
      mask_from({t, t}, [](int64_t, int64_t i, int64_t j) { return j < i; }),
      mask_from({B, H, t, t}, [](int64_t n, int64_t i, int64_t j) { return (i * 7 + j * 3 + n) % 5 == 0; }),
      mask_from({B, H, t, t}, [](int64_t n, int64_t i, int64_t j) { return j > (i * 13 + n * 5) % t; }),
      mask_from({B, 1, t, t}, [](int64_t n, int64_t i, int64_t j) { return n == 1 ? j > i : i % 3 == 0; }),
  };
  for (size_t i = 0; i < std::size(masks); ++i) {
    BOOST_TEST(max_difference<double>(masks[i], 61, B, t, D, H) < 1e-12, "mask " << i);
    BOOST_TEST(max_difference<float>(masks[i], 71, B, t, D, H) < 1e-5, "mask " << i);
  }
  for (const int64_t s : {int64_t(23), int64_t(50)}) {
    const Tensor<double> m = mask_from({t, s}, [](int64_t, int64_t i, int64_t j) { return j > i; });
    BOOST_TEST(max_difference<double>(m, 81, B, t, D, H, s) < 1e-12, "S " << s);
    BOOST_TEST(max_difference<double>(Tensor<double>(), 91, B, t, D, H, s) < 1e-12, "S " << s);
  }
  // And the float64 gradient check over three blocks.
  const int64_t tg = 35;
  const Tensor<double> window =
      mask_from({tg, tg}, [](int64_t, int64_t i, int64_t j) { return j > i || j + 9 <= i; });
  testing::check_gradients(
      [&](const std::vector<Tensor<double>>& in) { return fused(in[0], in[1], in[2], H, window); },
      {testing::random_tensor({1, tg, 4}, 12), testing::random_tensor({1, tg, 4}, 13),
       testing::random_tensor({1, tg, 4}, 14)});
}

// Weights over 4 MB are not kept but recomputed in backward: (2, 8, 384, 384) is 9.4 MB in float32.
constexpr int64_t kBigB = 2, kBigT = 384, kBigD = 16, kBigH = 8;

// Grouped-query and multi-query attention: 4 query heads on 2 or 1 kv heads, whose gradients sum over their
// query heads; causal, padding and local (window 5) masks over several blocks of query rows, and weights
// recomputed in backward.
BOOST_AUTO_TEST_CASE(grouped_query_attention_matches_composed) {
  const int64_t B = 2, t = 37, D = 16, H = 4;
  const Tensor<double> masks[] = {nn::causal_mask<double>(t), causal_padding_mask(B, t),
                                  nn::causal_mask<double>(t, 5)};
  for (const int64_t kv : {2, 1})
    for (size_t i = 0; i < std::size(masks); ++i) {
      BOOST_TEST(max_difference<double>(masks[i], 81, B, t, D, H, -1, kv) < 1e-12,
                 "kv " << kv << " mask " << i);
      BOOST_TEST(max_difference<float>(masks[i], 91, B, t, D, H, -1, kv) < 1e-5,
                 "kv " << kv << " mask " << i);
    }
  BOOST_TEST(max_difference<double>(nn::causal_mask<double>(kBigT), 83, 1, kBigT, 8, 4, -1, 2) < 1e-12);
}

// causal_mask's window: query i sees keys (i - w, i].
BOOST_AUTO_TEST_CASE(a_windowed_causal_mask_hides_keys_before_the_window) {
  const Tensor<double> m = nn::causal_mask<double>(6, 2);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) BOOST_TEST(m.data()[i * 6 + j] == ((j > i || j <= i - 2) ? 1.0 : 0.0));
}

BOOST_AUTO_TEST_CASE(recomputed_weights_match_composed_in_float64_and_float32) {
  const Tensor<double> masks[] = {Tensor<double>(), causal_padding_mask(kBigB, kBigT)};
  for (const Tensor<double>& m : masks) {
    BOOST_TEST(max_difference<double>(m, 31, kBigB, kBigT, kBigD, kBigH) < 1e-12);
    BOOST_TEST(max_difference<float>(m, 41, kBigB, kBigT, kBigD, kBigH) < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(the_graph_keeps_small_weights_and_recomputes_large_ones) {
  for (const int64_t t : {int64_t(64), kBigT}) {
    const Tensor<float> q = cast<float>(testing::random_tensor({kBigB, t, kBigD}, 51), true);
    const int64_t out_bytes = kBigB * t * kBigD * int64_t(sizeof(float));
    const int64_t weights_bytes = kBigB * kBigH * t * t * int64_t(sizeof(float));
    const Tensor<float> mask = nn::causal_mask<float>(t);
    const int64_t before = ag::detail::storage_live_bytes();
    const Tensor<float> out = fused(q, q, q, kBigH, mask);
    const int64_t held = ag::detail::storage_live_bytes() - before;
    BOOST_TEST(held == (t == kBigT ? out_bytes : out_bytes + weights_bytes), "T " << t);
  }
}

BOOST_AUTO_TEST_CASE(fully_masked_row_gives_zeros_and_no_gradient) {
  const int64_t B = 2, t = 5, D = 8, H = 2;
  Tensor<double> q = testing::random_tensor({B, t, D}, 1), k = testing::random_tensor({B, t, D}, 2),
                 v = testing::random_tensor({B, t, D}, 3);
  Tensor<double> out = fused(q, k, v, H, causal_padding_mask(B, t));
  // Batch entry 1, query 0: its only visible key (0) is padding.
  for (int64_t d = 0; d < D; ++d) BOOST_TEST(out.data()[(1 * t + 0) * D + d] == 0.0);
  ag::sum(out).backward();
  for (int64_t d = 0; d < D; ++d) BOOST_TEST(q.grad()[(1 * t + 0) * D + d] == 0.0);
}

BOOST_AUTO_TEST_CASE(fused_gradcheck_float64) {
  const int64_t B = 2, t = 4, D = 6, H = 2;
  const Tensor<double> masks[] = {Tensor<double>(), nn::causal_mask<double>(t), causal_padding_mask(B, t)};
  for (const Tensor<double>& m : masks)
    testing::check_gradients(
        [&](const std::vector<Tensor<double>>& in) { return fused(in[0], in[1], in[2], H, m); },
        {testing::random_tensor({B, t, D}, 5), testing::random_tensor({B, t, D}, 6),
         testing::random_tensor({B, t, D}, 7)});
  // Grouped-query attention (3 query heads on one kv head), causal and local.
  for (const Tensor<double>& m : {nn::causal_mask<double>(t), nn::causal_mask<double>(t, 2)})
    testing::check_gradients(
        [&](const std::vector<Tensor<double>>& in) { return fused(in[0], in[1], in[2], 3, m); },
        {testing::random_tensor({B, t, D}, 11), testing::random_tensor({B, t, 2}, 12),
         testing::random_tensor({B, t, 2}, 13)});
  // Cross-attention shapes (S != T) with a padding mask (B, 1, 1, S).
  const int64_t s = 3;
  const Tensor<double> pad = nn::padding_mask<double>({0, 0, 1, 1, 0, 0}, B, s);
  testing::check_gradients(
      [&](const std::vector<Tensor<double>>& in) { return fused(in[0], in[1], in[2], H, pad); },
      {testing::random_tensor({B, t, D}, 8), testing::random_tensor({B, s, D}, 9),
       testing::random_tensor({B, s, D}, 10)});
}

BOOST_AUTO_TEST_CASE(bad_shapes_name_the_op) {
  const Tensor<double> q = Tensor<double>::zeros({2, 4, 6}), k = Tensor<double>::zeros({2, 4, 6});
  BOOST_CHECK_THROW(ag::attention(q, k, k, 4, Tensor<double>(), 1.0), std::invalid_argument);
  BOOST_CHECK_THROW(ag::attention(q, Tensor<double>::zeros({2, 3, 6}), k, 2, Tensor<double>(), 1.0),
                    std::invalid_argument);
  BOOST_CHECK_THROW(ag::attention(q, k, k, 2, Tensor<double>::zeros({3, 4}), 1.0), std::invalid_argument);
  // k and v of 2 heads of 1 for 6 query heads of 1: 2 divides 6, fine; 4 heads do not.
  const Tensor<double> k4 = Tensor<double>::zeros({2, 4, 4});
  BOOST_CHECK_THROW(ag::attention(q, k4, k4, 6, Tensor<double>(), 1.0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(the_fused_op_gives_the_multi_head_attention_modules_output) {
  // The training forward's attention (nn/training_forward.cpp) against the module's reference forward.
  ag::Rng rng(3);
  nn::MultiHeadAttention<double> mha(8, 2, rng);
  const Tensor<double> x = testing::random_tensor({2, 5, 8}, 4, 1.0, 0.0, false);
  const Tensor<double> mask = nn::causal_mask<double>(5);
  const Tensor<double> reference = mha.forward(x, mask);
  const Tensor<double> z =
      ag::attention(ag::linear(x, mha.wq.weight, mha.wq.bias), ag::linear(x, mha.wk.weight, mha.wk.bias),
                    ag::linear(x, mha.wv.weight, mha.wv.bias), 2, mask, 1.0 / std::sqrt(4.0));
  const Tensor<double> fused_out = ag::linear(z, mha.wo.weight, mha.wo.bias);
  BOOST_REQUIRE((fused_out.shape() == reference.shape()));
  for (int64_t i = 0; i < reference.numel(); ++i)
    BOOST_TEST(std::abs(reference.data()[i] - fused_out.data()[i]) < 1e-12);
}

BOOST_AUTO_TEST_CASE(same_bits_for_one_and_two_threads) {
  // Each (batch, head) pair is computed whole by one thread: weights kept (T 64) or recomputed (T 384).
  for (const int64_t t : {int64_t(64), kBigT}) {
    const int64_t B = 2, D = 64, H = 8;
    auto run = [&](int threads) {
      ag::set_num_threads(threads);
      Tensor<float> q = cast<float>(testing::random_tensor({B, t, D}, 1), true),
                    k = cast<float>(testing::random_tensor({B, t, D}, 2), true),
                    v = cast<float>(testing::random_tensor({B, t, D}, 3), true);
      Tensor<float> out = fused(q, k, v, H, nn::causal_mask<float>(t));
      ag::sum(ag::mul(out, out)).backward();
      std::vector<float> all = out.to_vector();
      for (Tensor<float>* g : {&q, &k, &v}) all.insert(all.end(), g->grad(), g->grad() + g->numel());
      // Grouped-query: 8 query heads on 2 kv heads, whose gradients sum over 4 query heads each.
      Tensor<float> k2 = cast<float>(testing::random_tensor({B, t, D / 4}, 4), true),
                    v2 = cast<float>(testing::random_tensor({B, t, D / 4}, 5), true);
      ag::sum(fused(q, k2, v2, H, nn::causal_mask<float>(t))).backward();
      for (Tensor<float>* g : {&k2, &v2}) all.insert(all.end(), g->grad(), g->grad() + g->numel());
      return all;
    };
    const std::vector<float> one = run(1), two = run(2);
    ag::set_num_threads(1);
    BOOST_TEST(one == two, "T " << t);
  }
}
