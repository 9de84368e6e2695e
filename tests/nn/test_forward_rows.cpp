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
