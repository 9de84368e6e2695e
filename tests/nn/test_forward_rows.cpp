// nn::training_forward_rows (train.scored_rows_only): the logits of the scored rows and every parameter's
// gradient equal training_forward's on those rows, in float64, through each of its paths: the first
// block on the (token, position) grid (more sequences than tokens), the last block's queries at the
// positions every sequence shares, both at once in a one-block model, and neither.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "nn/training_forward.h"

namespace {

struct Case {
  std::string name;
  nn::ModelShape shape;
  int64_t batch = 0;
  bool shared = false;  // every sequence scores positions 4..6; else a random 40% of the rows
};

nn::ModelShape shape(int64_t layers) {
  nn::ModelShape s;
  s.vocab = 7;
  s.max_len = 8;
  s.d_model = 12;
  s.n_heads = 3;
  s.n_layers = layers;
  s.d_ff = 20;
  return s;
}

struct Outcome {
  std::vector<double> logits;
  std::vector<std::vector<double>> grads;
};

// The scored rows' logits and the gradients of sum(logits * w) for fixed random weights w.
Outcome run(const Case& c, const std::vector<int32_t>& ids, const std::vector<int64_t>& rows, bool by_rows) {
  ag::Rng init(3);
  nn::CausalLM<double> model(c.shape, init);
  const int64_t t = c.shape.max_len;
  const ag::Tensor<double> logits =
      by_rows ? nn::training_forward_rows(model, ids, c.batch, t, rows)
              : ag::select_rows(nn::training_forward(model, ids, c.batch, t, {}), rows);
  ag::Rng pick(5);
  ag::Tensor<double> w = ag::Tensor<double>::empty(logits.shape());
  for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] = pick.uniform() - 0.5;
  ag::sum(ag::mul(logits, w)).backward();
  Outcome out;
  out.logits.assign(logits.data(), logits.data() + logits.numel());
  for (const auto& p : model.named_parameters())
    out.grads.emplace_back(p.tensor->grad(), p.tensor->grad() + p.tensor->numel());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(scored_rows_give_the_full_forwards_logits_and_gradients) {
  std::vector<Case> cases;
  for (int64_t layers : {1, 2})
    for (int64_t batch : {5, 9})  // 5 < vocab 7 <= 9: the grid runs for 9
      for (bool shared : {false, true})
        cases.push_back({std::to_string(layers) + " blocks", shape(layers), batch, shared});
  nn::ModelShape modern = shape(2);  // the options that act on q and k: rotary turns them by position
  modern.positions = nn::PositionKind::rotary;
  modern.rotary_fraction = 0.5;
  modern.qk_norm = true;
  modern.norm = nn::NormKind::rms;
  modern.n_kv_heads = 1;     // k and v narrower than q
  modern.attn_window = {3};  // every block local: rows 4..6 of the last mask differ from causal
  for (int64_t batch : {5, 9})
    cases.push_back({"rotary, qk_norm, rms, one kv head, window", modern, batch, true});
  nn::ModelShape parallel = shape(1);
  parallel.parallel = true;
  cases.push_back({"parallel", parallel, 9, true});
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.name << ", batch " << c.batch
                              << (c.shared ? ", shared positions" : ", random rows")) {
      const int64_t t = c.shape.max_len;
      ag::Rng data(11);
      std::vector<int32_t> ids(static_cast<size_t>(c.batch * t));
      for (int32_t& id : ids) id = static_cast<int32_t>(data.uniform() * c.shape.vocab);
      std::vector<int64_t> rows;
      for (int64_t r = 0; r < c.batch * t; ++r)
        if (c.shared ? (r % t >= 4 && r % t <= 6) : data.uniform() < 0.4) rows.push_back(r);
      const Outcome full = run(c, ids, rows, false), picked = run(c, ids, rows, true);
      BOOST_TEST_REQUIRE(full.logits.size() == picked.logits.size());
      for (size_t i = 0; i < full.logits.size(); ++i)
        BOOST_TEST(picked.logits[i] == full.logits[i], boost::test_tools::tolerance(1e-12));
      double scale = 0;
      for (const auto& g : full.grads)
        for (double v : g) scale = std::max(scale, std::fabs(v));
      BOOST_TEST_REQUIRE(scale > 0);
      for (size_t p = 0; p < full.grads.size(); ++p)
        for (size_t i = 0; i < full.grads[p].size(); ++i)
          BOOST_TEST_REQUIRE(std::fabs(picked.grads[p][i] - full.grads[p][i]) <= 1e-12 * scale);
    }
  }
}

namespace {

// The graph the one-block grid path replaced: the grid's h, q, k and v gathered at every row of the
// batch, then the scored rows of h and q picked from those.
template <typename T>
ag::Tensor<T> gathered_at_every_row(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids,
                                    int64_t batch, int64_t t, const std::vector<int64_t>& rows,
                                    const std::vector<int64_t>& positions) {
  const int64_t vocab = model.shape.vocab, D = model.shape.d_model,
                per = static_cast<int64_t>(positions.size());
  std::vector<int32_t> grid(static_cast<size_t>(vocab * t));
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t i = 0; i < t; ++i) grid[v * t + i] = static_cast<int32_t>(v);
  std::vector<int64_t> at(ids.size());
  for (size_t r = 0; r < ids.size(); ++r)
    at[r] = static_cast<int64_t>(ids[r]) * t + static_cast<int64_t>(r) % t;
  const nn::TransformerBlock<T>& block = *model.blocks[0];
  const nn::MultiHeadAttention<T>& a = block.attn;
  const ag::Tensor<T> g = model.embed(grid, vocab, t);
  const ag::Tensor<T> x = nn::attention_input(block, g);
  const ag::Tensor<T> h = ag::gather_rows(g, at);
  const ag::Tensor<T> q =
      ag::gather_rows(nn::positioned(a, ag::linear(x, a.wq.weight, a.wq.bias), 0, a.q_norm.get()), at);
  const ag::Tensor<T> k =
      ag::gather_rows(nn::positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), 0, a.k_norm.get()), at);
  const ag::Tensor<T> v = ag::gather_rows(ag::linear(x, a.wv.weight, a.wv.bias), at);
  const auto as_batch = [&](const ag::Tensor<T>& r, int64_t len) { return ag::reshape(r, {batch, len, -1}); };
  const ag::Tensor<T> hb = as_batch(h, t);
  const ag::Tensor<T> z =
      ag::attention(as_batch(ag::gather_rows(q, rows), per), as_batch(k, t), as_batch(v, t), a.n_heads,
                    ag::select_rows(model.attention_masks(batch, t, {})[0], positions), a.score_scale());
  const ag::Tensor<T> resid_mid_rows =
      ag::linear(ag::reshape(z, {batch * per, D}), a.wo.weight, a.wo.bias, ag::select_rows(hb, rows));
  const ag::Tensor<T> input_rows = block.parallel ? ag::select_rows(hb, rows) : ag::Tensor<T>();
  return nn::unembed(model, nn::mlp_residual(block, resid_mid_rows, input_rows));
}

// The logits and every parameter's gradient of sum(logits * w), as raw bytes.
template <typename T>
std::vector<std::vector<unsigned char>> bytes_of_run(const nn::ModelShape& s, const std::vector<int32_t>& ids,
                                                     int64_t batch, const std::vector<int64_t>& rows,
                                                     const std::vector<int64_t>& positions, bool by_rows) {
  ag::Rng init(3);
  nn::CausalLM<T> model(s, init);
  const int64_t t = s.max_len;
  const ag::Tensor<T> logits = by_rows ? nn::training_forward_rows(model, ids, batch, t, rows)
                                       : gathered_at_every_row(model, ids, batch, t, rows, positions);
  ag::Rng pick(5);
  ag::Tensor<T> w = ag::Tensor<T>::empty(logits.shape());
  for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] = static_cast<T>(pick.uniform() - 0.5);
  ag::sum(ag::mul(logits, w)).backward();
  const auto bytes = [](const T* p, int64_t n) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return std::vector<unsigned char>(b, b + n * static_cast<int64_t>(sizeof(T)));
  };
  std::vector<std::vector<unsigned char>> out{bytes(logits.data(), logits.numel())};
  for (const auto& p : model.named_parameters()) out.push_back(bytes(p.tensor->grad(), p.tensor->numel()));
  return out;
}

template <typename T>
void check_one_block_grid_bits() {
  nn::ModelShape plain = shape(1), parallel = shape(1), modern = shape(1);
  parallel.parallel = true;  // keeps the graph that gathers every row
  modern.positions = nn::PositionKind::rotary;
  modern.rotary_fraction = 0.5;
  modern.qk_norm = true;
  modern.norm = nn::NormKind::none;
  modern.n_kv_heads = 1;
  for (const nn::ModelShape& s : {plain, parallel, modern}) {
    const int64_t batch = 11, t = s.max_len;  // more sequences than the vocabulary's 7 tokens: the grid
    ag::Rng data(13);
    std::vector<int32_t> ids(static_cast<size_t>(batch * t));
    for (int32_t& id : ids) id = static_cast<int32_t>(data.uniform() * s.vocab);
    const std::vector<int64_t> positions{5, 6};
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t p : positions) rows.push_back(b * t + p);
    const auto old_bits = bytes_of_run<T>(s, ids, batch, rows, positions, false);
    const auto new_bits = bytes_of_run<T>(s, ids, batch, rows, positions, true);
    BOOST_TEST_REQUIRE(old_bits.size() == new_bits.size());
    for (size_t i = 0; i < old_bits.size(); ++i)
      BOOST_TEST((old_bits[i] == new_bits[i]),
                 sizeof(T) * 8 << "-bit, parallel " << s.parallel << ", rotary "
                               << (s.positions == nn::PositionKind::rotary) << ": "
                               << (i == 0 ? "logits" : "gradient " + std::to_string(i - 1))
                               << " bits differ");
  }
}

}  // namespace

// One block over the grid with shared scored positions (grokking) gathers h and q at the scored rows only:
// the logits and every gradient have the bits of the graph that gathered every row and then picked them.
BOOST_AUTO_TEST_CASE(one_block_grid_rows_have_the_bits_of_gathering_every_row) {
  check_one_block_grid_bits<float>();
  check_one_block_grid_bits<double>();
}
