// Incremental decoding (nn/kv_cache.h, CausalLM::forward_cached) and sampling (nn/generate.h): the cached
// path's logits are the full forward's at every position (float32 within 1e-6, float64 within 1e-12, and
// to the bit when a row of activations fills whole 64-byte lines) whether a sequence is fed at once, a
// token at a time or in uneven chunks, with and without MLP, at several depths and head counts (and
// prompts longer than attention's 16-row blocks); they agree with the reference forward (hooks) to float
// rounding; the cache holds the reference forward's keys and values; feeding past max_len, an empty
// input, a bad id or another model's cache is an error that leaves the cache as it was. Sampling: greedy
// is the argmax, the same seed gives the same tokens, top-k = 1 is greedy, draws follow
// softmax(logits / temperature); generate with and without the cache gives the same tokens, and stops at
// max_new or max_len.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/generate.h"
#include "nn/transformer.h"

namespace nn {
std::ostream& operator<<(std::ostream& out, StopReason r) {
  return out << stop_reason_name(r);
}
}  // namespace nn

namespace {

nn::ModelShape shape(int64_t layers, int64_t heads, int64_t d_model, bool attention_only,
                     int64_t max_len = 20) {
  nn::ModelShape s;
  s.vocab = 13;
  s.max_len = max_len;
  s.d_model = d_model;
  s.n_heads = heads;
  s.n_layers = layers;
  s.d_ff = 2 * d_model;
  s.attention_only = attention_only;
  return s;
}

// A shape with rotary positions on `fraction` of each head's dims (the cache holds the turned keys).
nn::ModelShape rotary(nn::ModelShape s, double fraction) {
  s.positions = nn::PositionKind::rotary;
  s.rotary_fraction = fraction;
  return s;
}

// The shapes every equality test runs: depth 1..3, 1..4 heads, head sizes 4..16 (some not a whole SIMD
// vector), with and without MLP; rotary positions, whole and partial; no positions; grouped-query and local
// attention.
std::vector<nn::ModelShape> shapes() {
  nn::ModelShape nope = shape(2, 2, 16, false);
  nope.positions = nn::PositionKind::none;
  nn::ModelShape unscaled = rotary(shape(2, 2, 16, false), 0.5);
  unscaled.attn_scale = nn::AttnScale::none;
  nn::ModelShape qk = rotary(shape(2, 4, 32, false), 0.5);
  qk.qk_norm = true;
  std::vector<nn::ModelShape> all = {shape(1, 1, 16, false), shape(2, 4, 16, false), shape(3, 2, 20, false),
                                     shape(2, 3, 12, true),  shape(1, 2, 32, true),  shape(3, 4, 32, false)};
  // The model options whose MLP differs: a gated MLP (SwiGLU, ln2 feeding two products) and ReLU^2.
  nn::ModelShape gated = shape(2, 4, 16, false), relu2 = shape(1, 2, 32, false);
  gated.activation = nn::Activation::swiglu;
  relu2.activation = nn::Activation::relu2;
  all.push_back(gated);
  all.push_back(relu2);
  // Parallel blocks, tied embeddings and soft-capped logits.
  nn::ModelShape wired = shape(2, 4, 16, false);
  wired.parallel = true, wired.tie_embeddings = true, wired.logit_softcap = 2.0;
  all.push_back(wired);
  // Grouped-query attention (the cache holds the kv heads only) with local layers; multi-query attention
  // with one window for every layer.
  nn::ModelShape gqa = rotary(shape(2, 4, 16, false), 0.5), mqa = shape(3, 4, 32, false);
  gqa.n_kv_heads = 2, gqa.attn_window = {3, 0};
  mqa.n_kv_heads = 1, mqa.attn_window = {5};
  for (const nn::ModelShape& s : {unscaled, qk, rotary(shape(2, 4, 16, false), 1.0),
                                  rotary(shape(3, 2, 20, true), 0.6), nope, gqa, mqa})
    all.push_back(s);
  return all;
}

std::vector<int32_t> sequence(int64_t n, int64_t vocab, uint64_t seed) {
  ag::Rng rng(seed);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab))));
  return ids;
}

// Whether every row of activations (d_model and d_ff values) fills whole 64-byte lines. Then a row has the
// same alignment wherever it sits, so Eigen's row reductions (LayerNorm's mean and variance) sum in the
// same order in the cached and the full forward, and their logits agree to the bit; otherwise the row's
// unaligned head is peeled differently, and they agree to rounding.
bool whole_lines(const nn::ModelShape& s, size_t scalar_bytes) {
  return (s.d_model * scalar_bytes) % 64 == 0 && (s.d_ff * scalar_bytes) % 64 == 0;
}

// The uncached forward (the training forward: no hooks), (1, T, V).
template <typename T>
ag::Tensor<T> full_logits(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids) {
  ag::NoGradScope no_grad;
  return model.forward(ids, 1, static_cast<int64_t>(ids.size()));
}

// Rows [row0, row0 + n) of the full forward's logits against the n rows of `cached`: the worst
// |cached - full| / max(1, max|full|), and whether every bit agrees.
template <typename T>
struct Diff {
  double worst = 0;
  bool bits = true;
};
template <typename T>
void compare_rows(const ag::Tensor<T>& full, int64_t row0, const ag::Tensor<T>& cached, Diff<T>& d) {
  const int64_t V = full.size(-1), n = cached.size(1);
  BOOST_TEST_REQUIRE(cached.dim() == 3);
  BOOST_TEST_REQUIRE(cached.size(0) == 1);
  BOOST_TEST_REQUIRE(cached.size(2) == V);
  double scale = 1;
  for (int64_t i = 0; i < full.numel(); ++i) scale = std::max(scale, std::abs(double(full.data()[i])));
  const T* f = full.data() + row0 * V;
  for (int64_t i = 0; i < n * V; ++i) {
    d.worst = std::max(d.worst, std::abs(double(cached.data()[i]) - double(f[i])) / scale);
    if (std::memcmp(&cached.data()[i], &f[i], sizeof(T)) != 0) d.bits = false;
  }
}

// Feeds `ids` to a fresh cache in chunks of the given sizes (cycled) and compares every chunk's logits
// with the full forward's rows.
template <typename T>
Diff<T> cached_against_full(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids,
                            const std::vector<int64_t>& chunks) {
  const ag::Tensor<T> full = full_logits(model, ids);
  nn::KVCache<T> cache(model.shape);
  Diff<T> d;
  size_t c = 0;
  for (int64_t at = 0; at < static_cast<int64_t>(ids.size()); ++c) {
    const int64_t n = std::min<int64_t>(chunks[c % chunks.size()], static_cast<int64_t>(ids.size()) - at);
    const std::vector<int32_t> part(ids.begin() + at, ids.begin() + at + n);
    const ag::Tensor<T> logits = model.forward_cached(part, cache);
    BOOST_TEST_REQUIRE(!logits.requires_grad());
    compare_rows(full, at, logits, d);
    at += n;
    BOOST_TEST_REQUIRE(cache.size() == at);
  }
  return d;
}

template <typename T>
void check_every_shape(double tolerance) {
  uint64_t seed = 1;
  for (const nn::ModelShape& s : shapes()) {
    ag::Rng rng(seed++);
    const nn::CausalLM<T> model(s, rng);
    const std::string name = std::to_string(s.n_layers) + " layers, " + std::to_string(s.n_heads) +
                             " heads, d_model " + std::to_string(s.d_model) +
                             (s.attention_only ? ", attention only" : ", with MLP") +
                             (s.positions == nn::PositionKind::rotary ? ", rotary" : "") +
                             (s.positions == nn::PositionKind::none ? ", no positions" : "");
    for (int64_t T_len : {int64_t(1), int64_t(7), s.max_len}) {
      const std::vector<int32_t> ids = sequence(T_len, s.vocab, seed * 100 + T_len);
      for (const std::vector<int64_t>& chunks :
           {std::vector<int64_t>{T_len}, std::vector<int64_t>{1}, std::vector<int64_t>{3, 1, 5}}) {
        const Diff<T> d = cached_against_full(model, ids, chunks);
        BOOST_TEST_MESSAGE(name << ", T " << T_len << ", first chunk " << chunks[0] << ": worst " << d.worst
                                << (d.bits ? ", same bits" : ", bits differ"));
        BOOST_TEST(d.worst <= tolerance,
                   name << ", T " << T_len << ", first chunk " << chunks[0] << ": " << d.worst);
        if (whole_lines(s, sizeof(T)))
          BOOST_TEST(d.bits, name << ", T " << T_len << ", first chunk " << chunks[0] << ": bits differ");
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cached_logits)

BOOST_AUTO_TEST_CASE(float32_equal_the_full_forward_at_every_position) {
  check_every_shape<float>(1e-6);
}

BOOST_AUTO_TEST_CASE(float64_equal_the_full_forward_at_every_position) {
  check_every_shape<double>(1e-12);
}

BOOST_AUTO_TEST_CASE(agree_with_the_reference_forward) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool attention_only = variant == 1;
    ag::Rng rng(7);
    const nn::ModelShape s = shape(2, 4, 16, attention_only);
    // Variant 2 has rotary positions: the reference forward's composed rotation against the cache's op.
    const nn::CausalLM<double> model(variant == 2 ? rotary(s, 0.5) : s, rng);
    const std::vector<int32_t> ids = sequence(20, 13, 3);
    nn::Hooks<double> hooks;  // an empty Hooks object selects the reference forward
    ag::Tensor<double> reference;
    {
      ag::NoGradScope no_grad;
      reference = model.forward(ids, 1, 20, {}, &hooks);
    }
    nn::KVCache<double> cache(model.shape);
    Diff<double> d;
    for (int64_t t = 0; t < 20; ++t) compare_rows(reference, t, model.forward_cached({ids[t]}, cache), d);
    BOOST_TEST(d.worst <= 1e-12, "attention_only " << attention_only << ": " << d.worst);
  }
}

BOOST_AUTO_TEST_CASE(the_cache_holds_the_reference_keys_and_values) {
  for (const double fraction : {0.0, 1.0}) {  // rotary: the keys as attn.k holds them, turned
    ag::Rng rng(11);
    const nn::CausalLM<double> model(
        fraction > 0 ? rotary(shape(2, 4, 16, false), fraction) : shape(2, 4, 16, false), rng);
    const std::vector<int32_t> ids = sequence(9, 13, 5);
    nn::Hooks<double> hooks;
    for (int l = 0; l < 2; ++l)
      for (const char* p : {"attn.k", "attn.v"}) hooks.capture("blocks." + std::to_string(l) + "." + p);
    {
      ag::NoGradScope no_grad;
      model.forward(ids, 1, 9, {}, &hooks);
    }
    nn::KVCache<double> cache(model.shape);
    model.forward_cached({ids.begin(), ids.begin() + 4}, cache);
    model.forward_cached({ids.begin() + 4, ids.end()}, cache);
    BOOST_TEST(cache.size() == 9);
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 4; ++h) {
        const ag::Tensor<double>& k =
            hooks.captured("blocks." + std::to_string(l) + ".attn.k");  // (1, T, H, dk)
        const ag::Tensor<double>& v = hooks.captured("blocks." + std::to_string(l) + ".attn.v");
        const auto keys = cache.keys(l, h);
        const auto values = cache.values(l, h);
        BOOST_TEST_REQUIRE(keys.rows() == 9);
        BOOST_TEST_REQUIRE(keys.cols() == 4);
        double worst = 0;
        for (int p = 0; p < 9; ++p)
          for (int j = 0; j < 4; ++j) {
            worst = std::max(worst, std::abs(keys(p, j) - k.data()[(p * 4 + h) * 4 + j]));
            worst = std::max(worst, std::abs(values(p, j) - v.data()[(p * 4 + h) * 4 + j]));
          }
        BOOST_TEST(worst <= 1e-12, "layer " << l << " head " << h << ": " << worst);
      }
  }
}

BOOST_AUTO_TEST_CASE(a_cleared_cache_starts_a_new_sequence) {
  ag::Rng rng(5);
  const nn::CausalLM<float> model(shape(2, 2, 16, false), rng);
  const std::vector<int32_t> a = sequence(6, 13, 1), b = sequence(10, 13, 2);
  nn::KVCache<float> cache(model.shape);
  model.forward_cached(a, cache);
  cache.clear();
  BOOST_TEST(cache.size() == 0);
  Diff<float> d;
  compare_rows(full_logits(model, b), 0, model.forward_cached(b, cache), d);
  BOOST_TEST(d.bits);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

bool says(const std::invalid_argument& e, const std::string& what) {
  return std::string(e.what()).find(what) != std::string::npos;
}

BOOST_AUTO_TEST_CASE(past_max_len_is_an_error_and_the_cache_is_unchanged) {
  ag::Rng rng(3);
  const nn::CausalLM<float> model(shape(2, 2, 16, false, 8), rng);
  const std::vector<int32_t> ids = sequence(8, 13, 9);
  nn::KVCache<float> cache(model.shape);
  BOOST_CHECK_EXCEPTION(model.forward_cached(sequence(9, 13, 1), cache), std::invalid_argument,
                        [](const auto& e) { return says(e, "max_len is 8"); });
  BOOST_TEST(cache.size() == 0);
  model.forward_cached({ids.begin(), ids.begin() + 6}, cache);
  BOOST_CHECK_EXCEPTION(model.forward_cached({1, 2, 3}, cache), std::invalid_argument, [](const auto& e) {
    return says(e, "3 new tokens after 6 cached would make 9 positions, but max_len is 8");
  });
  BOOST_TEST(cache.size() == 6);
  model.forward_cached({ids.begin() + 6, ids.end()}, cache);  // exactly max_len: fine
  BOOST_TEST(cache.size() == 8);
  BOOST_CHECK_THROW(model.forward_cached({1}, cache), std::invalid_argument);
  BOOST_TEST(cache.size() == 8);
}

BOOST_AUTO_TEST_CASE(bad_input_is_an_error_and_the_cache_is_unchanged) {
  ag::Rng rng(3);
  const nn::CausalLM<float> model(shape(2, 2, 16, false), rng);
  const std::vector<int32_t> ids = sequence(10, 13, 4);
  nn::KVCache<float> cache(model.shape);
  model.forward_cached({ids.begin(), ids.begin() + 5}, cache);
  BOOST_CHECK_EXCEPTION(model.forward_cached({}, cache), std::invalid_argument,
                        [](const auto& e) { return says(e, "no tokens"); });
  BOOST_CHECK_THROW(model.forward_cached({3, 13}, cache), std::invalid_argument);  // 13: outside the vocab
  BOOST_CHECK_THROW(model.forward_cached({-1}, cache), std::invalid_argument);
  BOOST_TEST(cache.size() == 5);
  // The failed calls left nothing behind: the rest of the sequence still gives the full forward's logits.
  Diff<float> d;
  compare_rows(full_logits(model, ids), 5, model.forward_cached({ids.begin() + 5, ids.end()}, cache), d);
  BOOST_TEST(d.bits);

  nn::KVCache<float> other(shape(2, 4, 16, false));
  BOOST_CHECK_EXCEPTION(model.forward_cached({1}, other), std::invalid_argument,
                        [](const auto& e) { return says(e, "another model shape"); });
  BOOST_CHECK_THROW(nn::KVCache<float>(shape(2, 3, 16, false)),
                    std::invalid_argument);  // 3 does not divide 16
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sampling)

BOOST_AUTO_TEST_CASE(greedy_is_the_argmax_and_draws_nothing) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  ag::Rng rng(1), untouched(1);
  BOOST_TEST(nn::sample_token(logits.data(), 5, {0.0, 0}, rng) == 1);  // the lower id of a tie
  BOOST_TEST(rng.next_u64() == untouched.next_u64());
  // top-k 1 at any temperature: the argmax too.
  for (int i = 0; i < 20; ++i) BOOST_TEST(nn::sample_token(logits.data(), 5, {2.0, 1}, rng) == 1);
}

BOOST_AUTO_TEST_CASE(draws_follow_the_tempered_softmax_within_the_top_k) {
  const std::vector<double> logits = {0.0, std::log(3.0), -50.0, std::log(2.0)};
  ag::Rng rng(2);
  std::vector<int> counts(4, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[nn::sample_token(logits.data(), 4, {1.0, 0}, rng)];
  // p = 1/6, 3/6, ~0, 2/6; 20000 draws: a standard deviation of at most 0.0036.
  BOOST_TEST(std::abs(counts[0] / double(n) - 1.0 / 6) < 0.02);
  BOOST_TEST(std::abs(counts[1] / double(n) - 3.0 / 6) < 0.02);
  BOOST_TEST(counts[2] == 0);
  BOOST_TEST(std::abs(counts[3] / double(n) - 2.0 / 6) < 0.02);
  // top-k 2 keeps ids 1 and 3: p = 3/5, 2/5.
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < n; ++i) ++counts[nn::sample_token(logits.data(), 4, {1.0, 2}, rng)];
  BOOST_TEST(counts[0] + counts[2] == 0);
  BOOST_TEST(std::abs(counts[1] / double(n) - 0.6) < 0.02);
  // Temperature 2 flattens: p ~ exp(l / 2), so id 1 against id 0 is sqrt(3) : 1.
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < n; ++i) ++counts[nn::sample_token(logits.data(), 4, {2.0, 0}, rng)];
  const double z = 1 + std::sqrt(3.0) + std::sqrt(2.0);
  BOOST_TEST(std::abs(counts[1] / double(n) - std::sqrt(3.0) / z) < 0.02);
}

BOOST_AUTO_TEST_CASE(bad_options_and_logits_are_errors) {
  const std::vector<float> logits = {0.5f, 2.0f};
  ag::Rng rng(1);
  BOOST_CHECK_THROW(nn::sample_token(logits.data(), 2, {-1.0, 0}, rng), std::invalid_argument);
  BOOST_CHECK_THROW(nn::sample_token(logits.data(), 2, {std::nan(""), 0}, rng), std::invalid_argument);
  BOOST_CHECK_THROW(nn::sample_token(logits.data(), 2, {INFINITY, 0}, rng), std::invalid_argument);
  BOOST_CHECK_THROW(nn::sample_token(logits.data(), 2, {1.0, -1}, rng), std::invalid_argument);
  const std::vector<float> bad = {0.5f, NAN};
  BOOST_CHECK_THROW(nn::sample_token(bad.data(), 2, {0.0, 0}, rng), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(generation)

BOOST_AUTO_TEST_CASE(cached_and_uncached_give_the_same_tokens) {
  for (bool attention_only : {false, true}) {
    ag::Rng rng(21);
    const nn::CausalLM<float> model(shape(2, 4, 16, attention_only), rng);
    const std::vector<int32_t> prompt = sequence(5, 13, 8);
    for (const nn::SamplingOptions& s :
         {nn::SamplingOptions{0.0, 0}, nn::SamplingOptions{1.0, 0}, nn::SamplingOptions{0.7, 4}}) {
      for (uint64_t seed : {uint64_t(1), uint64_t(2)}) {
        nn::GenerateOptions o;
        o.sampling = s;
        o.seed = seed;
        const nn::Generation cached = nn::generate(model, prompt, o);
        o.use_cache = false;
        const nn::Generation uncached = nn::generate(model, prompt, o);
        BOOST_TEST(cached.ids == uncached.ids, "temperature " << s.temperature << " seed " << seed);
        // Until max_len: 20 read, so 16 generated after a prompt of 5.
        BOOST_TEST(cached.ids.size() == 16u);
        BOOST_TEST(cached.stopped == nn::StopReason::max_len);
      }
    }
  }
}

// Past max_len (20 here) the context slides to the last max_len tokens: the cached path reads the window
// afresh as the uncached one does, and each token after the window is full is the argmax of a full forward
// over the last 20 tokens.
BOOST_AUTO_TEST_CASE(max_new_past_max_len_slides_the_window) {
  ag::Rng rng(9);
  const nn::CausalLM<float> model(shape(2, 4, 16, false), rng);
  const std::vector<int32_t> prompt = sequence(5, 13, 3);
  nn::GenerateOptions o;
  o.max_new = 40;
  o.sampling.temperature = 0;
  const nn::Generation cached = nn::generate(model, prompt, o);
  o.use_cache = false;
  const nn::Generation uncached = nn::generate(model, prompt, o);
  BOOST_TEST(cached.ids.size() == 40u);
  BOOST_TEST(cached.stopped == nn::StopReason::max_new);
  BOOST_TEST(cached.ids == uncached.ids, boost::test_tools::per_element());
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), cached.ids.begin(), cached.ids.end());
  const int64_t V = model.shape.vocab;
  for (size_t k = 20; k < all.size(); ++k) {  // token k drawn from the 20 tokens before it
    const std::vector<int32_t> window(all.begin() + static_cast<int64_t>(k) - 20, all.begin() + k);
    const ag::Tensor<float> logits = model.forward(window, 1, 20);
    const float* last = logits.data() + 19 * V;
    BOOST_TEST(all[k] == std::max_element(last, last + V) - last, "token " << k);
  }
}

BOOST_AUTO_TEST_CASE(greedy_is_the_argmax_of_the_full_forward_at_each_step) {
  ag::Rng rng(4);
  const nn::CausalLM<float> model(shape(3, 2, 20, false), rng);
  const std::vector<int32_t> prompt = sequence(3, 13, 6);
  nn::GenerateOptions o;
  o.sampling.temperature = 0;
  const nn::Generation g = nn::generate(model, prompt, o);
  std::vector<int32_t> ids = prompt;
  for (int32_t next : g.ids) {
    const ag::Tensor<float> logits = full_logits(model, ids);
    const float* row = logits.data() + (ids.size() - 1) * 13;
    BOOST_TEST(next == std::max_element(row, row + 13) - row);
    ids.push_back(next);
  }
}

BOOST_AUTO_TEST_CASE(the_same_seed_the_same_tokens_and_seeds_differ) {
  ag::Rng rng(4);
  const nn::CausalLM<float> model(shape(2, 2, 16, false), rng);
  nn::GenerateOptions o;
  o.sampling.temperature = 1.0;
  o.seed = 5;
  const nn::Generation a = nn::generate(model, {1, 2}, o), b = nn::generate(model, {1, 2}, o);
  BOOST_TEST(a.ids == b.ids);
  o.seed = 6;
  BOOST_TEST(nn::generate(model, {1, 2}, o).ids != a.ids);  // 18 draws from near-uniform over 13 tokens
}

BOOST_AUTO_TEST_CASE(stops_at_max_new_or_max_len) {
  ag::Rng rng(4);
  const nn::CausalLM<float> model(shape(1, 2, 16, false, 8), rng);
  nn::GenerateOptions o;
  o.max_new = 3;
  nn::Generation g = nn::generate(model, {1, 2}, o);
  BOOST_TEST(g.ids.size() == 3u);
  BOOST_TEST(g.stopped == nn::StopReason::max_new);
  BOOST_TEST(nn::stop_reason_name(g.stopped) == std::string("max_new"));
  o.max_new = 0;
  g = nn::generate(model, {1, 2}, o);
  BOOST_TEST(g.ids.empty());
  BOOST_TEST(g.stopped == nn::StopReason::max_new);
  o.max_new = 100;  // past max_len the window slides: all 100
  g = nn::generate(model, {1, 2}, o);
  BOOST_TEST(g.ids.size() == 100u);
  BOOST_TEST(g.stopped == nn::StopReason::max_new);
  o.max_new = -1;  // no max_new: until max_len
  g = nn::generate(model, {1, 2}, o);
  BOOST_TEST(g.ids.size() == 7u);  // 8 read (2 prompt + 6 generated), the 7th drawn from the last
  BOOST_TEST(g.stopped == nn::StopReason::max_len);
  BOOST_TEST(nn::stop_reason_name(g.stopped) == std::string("max_len"));
  o.max_new = 7;  // both at once: max_new, what was asked for
  BOOST_TEST(nn::generate(model, {1, 2}, o).stopped == nn::StopReason::max_new);
  o.max_new = -1;
  g = nn::generate(model, std::vector<int32_t>(8, 1), o);  // a full prompt: one token, from its last position
  BOOST_TEST(g.ids.size() == 1u);
  BOOST_TEST(g.stopped == nn::StopReason::max_len);
  BOOST_CHECK_THROW(nn::generate(model, std::vector<int32_t>(9, 1), o), std::invalid_argument);
  BOOST_CHECK_THROW(nn::generate(model, {}, o), std::invalid_argument);
  BOOST_CHECK_THROW(nn::generate(model, {13}, o), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
