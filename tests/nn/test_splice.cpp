// Hooks::splice: a computation replaced by a function of its input. Splicing each MLP, each attention
// pattern and the unembedding with functions that recompute them the module's way gives the unspliced
// logits; a splice replaces what it splices (the MLP's own hook points are not reached, a spliced pattern
// is what attention uses, gradients reach the splice's input); a point without a computation to splice is
// a one-line error.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/training_forward.h"
#include "nn/transformer.h"

namespace {

nn::CausalLM<double> model(bool parallel) {
  nn::ModelShape s;
  s.vocab = 11, s.max_len = 8, s.d_model = 16, s.n_heads = 4, s.n_layers = 2, s.d_ff = 32;
  s.parallel = parallel;
  s.logit_softcap = parallel ? 3.0 : 0.0;
  ag::Rng rng(7);
  return nn::CausalLM<double>(s, rng);
}

const std::vector<int32_t> kIds = {1, 4, 2, 7, 3};

}  // namespace

BOOST_AUTO_TEST_CASE(splicing_with_the_modules_own_computation_changes_nothing) {
  for (bool parallel : {false, true}) {
    const nn::CausalLM<double> m = model(parallel);
    ag::NoGradScope no_grad;
    const ag::Tensor<double> plain = m.forward(kIds, 1, 5, {}, nullptr);
    nn::Hooks<double> capture;
    for (size_t l = 0; l < 2; ++l) capture.capture(nn::hook_name(nn::Point::attn_pattern, l));
    m.forward(kIds, 1, 5, {}, &capture);
    nn::Hooks<double> hooks;
    int mlp_calls = 0, reached_pre = 0;
    for (size_t l = 0; l < 2; ++l) {
      const nn::MLP<double>& mlp = *m.blocks[l]->mlp;
      hooks.splice(nn::hook_name(nn::Point::mlp_out, l), [&mlp, &mlp_calls](const ag::Tensor<double>& x) {
        ++mlp_calls;
        return mlp.forward(x);
      });
      hooks.add(nn::hook_name(nn::Point::mlp_pre, l), [&reached_pre](const ag::Tensor<double>& v) {
        ++reached_pre;
        return v;
      });
      const ag::Tensor<double> pattern = capture.captured(nn::hook_name(nn::Point::attn_pattern, l));
      hooks.splice(nn::hook_name(nn::Point::attn_pattern, l),
                   [pattern](const ag::Tensor<double>&) { return pattern; });
    }
    hooks.splice("logits", [&m](const ag::Tensor<double>& x) {
      return nn::soft_cap(m.lm_head.forward(x), m.shape.logit_softcap);
    });
    const ag::Tensor<double> spliced = m.forward(kIds, 1, 5, {}, &hooks);
    BOOST_TEST(mlp_calls == 2);
    BOOST_TEST(reached_pre == 0);  // the spliced MLP's inner points are not reached
    double worst = 0;
    for (int64_t i = 0; i < plain.numel(); ++i)
      worst = std::max(worst, std::abs(plain.data()[i] - spliced.data()[i]));
    BOOST_TEST(worst < 1e-12, "parallel " << parallel << ": " << worst);
  }
}

BOOST_AUTO_TEST_CASE(a_splice_replaces_what_it_splices_and_passes_gradients_to_its_input) {
  const nn::CausalLM<double> m = model(false);
  nn::Hooks<double> hooks;
  ag::Tensor<double> seen;
  // The first layer's MLP spliced out for twice its input; uniform patterns in the second layer.
  hooks.splice("blocks.0.mlp.out", [&seen](const ag::Tensor<double>& x) {
    seen = x;
    return ag::scale(x, 2.0);
  });
  hooks.splice("blocks.1.attn.pattern", [](const ag::Tensor<double>& x) {
    const int64_t B = x.size(0), T = x.size(1);
    ag::Tensor<double> p = ag::Tensor<double>::zeros({B, 4, T, T});
    for (int64_t b = 0; b < B * 4; ++b)
      for (int64_t q = 0; q < T; ++q)
        for (int64_t k = 0; k <= q; ++k) p.data()[(b * T + q) * T + k] = 1.0 / static_cast<double>(q + 1);
    return p;
  });
  hooks.capture("blocks.0.mlp.out");
  hooks.capture("blocks.0.ln2.out");
  hooks.capture("blocks.1.attn.pattern");
  hooks.grad("blocks.0.ln2.out");
  ag::sum(m.forward(kIds, 1, 5, {}, &hooks)).backward();
  const ag::Tensor<double>& in = hooks.captured("blocks.0.ln2.out");
  const ag::Tensor<double>& out = hooks.captured("blocks.0.mlp.out");
  for (int64_t i = 0; i < in.numel(); ++i) BOOST_TEST(out.data()[i] == 2 * in.data()[i]);
  BOOST_TEST(seen.numel() == in.numel());
  BOOST_TEST(hooks.captured("blocks.1.attn.pattern").data()[5 + 0] ==
             0.5);  // query 1 reads keys 0 and 1 alike
  const ag::Tensor<double> g = hooks.gradient("blocks.0.ln2.out");
  double norm = 0;
  for (int64_t i = 0; i < g.numel(); ++i) norm += std::abs(g.data()[i]);
  BOOST_TEST(norm > 0);  // the gradient reaches the MLP's input through the splice
}

BOOST_AUTO_TEST_CASE(a_point_without_a_computation_to_splice_is_an_error) {
  nn::Hooks<double> hooks;
  auto id = [](const ag::Tensor<double>& x) { return x; };
  for (const std::string bad :
       {"blocks.0.resid_pre", "blocks.0.attn.z", "mlp.out", "blocks.x.mlp.out", "logit"}) {
    try {
      hooks.splice(bad, id);
      BOOST_ERROR("no error for " << bad);
    } catch (const std::invalid_argument& e) {
      BOOST_TEST(std::string(e.what()).find("hook " + bad + ": splice") == 0, e.what());
    }
  }
  const nn::CausalLM<double> m = model(false);
  nn::Hooks<double> far;
  far.splice("blocks.7.mlp.out", id);  // a layer the model does not have
  BOOST_CHECK_THROW(m.forward(kIds, 1, 5, {}, &far), std::invalid_argument);
}
