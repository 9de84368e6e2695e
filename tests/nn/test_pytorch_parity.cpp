// PyTorch parity in float32 against committed float64 references (tests/fixtures/, made by
// make_fixtures.py): the lesson's nn.MultiheadAttention, and 2-layer / attention-only CausalLMs, and the
// 2-layer model with each model option (RMSNorm; rotary and no positions, unscaled attention, QK-norm;
// ReLU^2, SwiGLU, GEGLU; parallel, tied, soft-capped), with
// logits, loss, attention weights and every parameter gradient. Each tensor's error is reported.
#include <boost/test/unit_test.hpp>

#include "common/fixture.h"
#include "nn/transformer.h"

using testing::compare;
using testing::Fixture;
using F = ag::Tensor<float>;

namespace {

template <typename M>
void load_parameters(M& module, const Fixture& fx) {
  for (auto& p : module.named_parameters()) {
    BOOST_REQUIRE_MESSAGE(fx.has(p.name), "fixture lacks " << p.name);
    F ref = fx.tensor<float>(p.name);
    BOOST_REQUIRE_MESSAGE(ref.shape() == p.tensor->shape(),
                          p.name << ": shape " << ag::shape_str(ref.shape()));
    p.tensor->values() = ref.values();
  }
}

void expect_close(const std::string& what, const F& ours, const ag::Tensor<double>& ref, double rtol) {
  const testing::Difference d = compare(ours, ref);
  BOOST_TEST_MESSAGE(what << ": max |diff| " << d.max_abs << ", relative to max|ref| " << d.relative());
  BOOST_TEST(d.within(rtol, 1e-6),
             what << ": max |diff| " << d.max_abs << " > " << rtol << " * " << d.ref_scale);
}

// Mean over heads: (B, H, T, S) -> (B, T, S), as average_attn_weights=True.
F head_average(const F& w) {
  const int64_t B = w.size(0), H = w.size(1), T = w.size(2), S = w.size(3);
  F out = F::zeros({B, T, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T * S; ++i) out.data()[b * T * S + i] += w.data()[(b * H + h) * T * S + i] / H;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(multihead_attention_matches_torch_multiheadattention) {
  Fixture fx("mha_lesson.json");
  ag::Rng rng(0);
  nn::MultiHeadAttention<float> mha(8, 2, rng);
  load_parameters(mha, fx);
  F x = fx.tensor<float>("x");
  nn::Hooks<float> hooks;
  const std::string pattern = nn::hook_name(nn::Point::attn_pattern, 0);
  hooks.capture(pattern);
  const nn::HookSite<float> at(&hooks, nn::block_prefix(0));

  F out = mha.forward(x, {}, at);
  expect_close("output", out, fx.tensor<double>("output"), 1e-5);
  expect_close("weights (head average)", head_average(hooks.captured(pattern)), fx.tensor<double>("weights"),
               1e-5);
  expect_close("weights per head", hooks.captured(pattern), fx.tensor<double>("weights_per_head"), 1e-5);

  F causal = mha.forward(x, nn::causal_mask<float>(6), at);
  expect_close("output causal", causal, fx.tensor<double>("output_causal"), 1e-5);
  expect_close("weights causal", head_average(hooks.captured(pattern)), fx.tensor<double>("weights_causal"),
               1e-5);
}

// The reference forward (with hooks, capturing every pattern) or the training forward (without).
void check_causal_lm(const std::string& file, bool reference) {
  Fixture fx(file);
  const auto& m = fx.meta();
  nn::ModelShape shape;
  shape.vocab = m.at("vocab");
  shape.max_len = m.at("max_len");
  shape.d_model = m.at("d_model");
  shape.n_heads = m.at("n_heads");
  shape.n_layers = m.at("n_layers");
  shape.d_ff = m.at("d_ff");
  shape.attention_only = m.at("attention_only");
  // The model options a fixture names (make_fixtures.py's causal_lm_<option>.json); absent: the default.
  if (m.contains("norm")) {
    const std::string norm = m.at("norm");
    BOOST_REQUIRE_MESSAGE(norm == "layer" || norm == "rms" || norm == "none", file << ": norm " << norm);
    shape.norm = norm == "rms"    ? nn::NormKind::rms
                 : norm == "none" ? nn::NormKind::none
                                  : nn::NormKind::layer;
  }
  if (m.contains("norm_eps")) shape.norm_eps = m.at("norm_eps");
  if (m.contains("positions")) {
    const std::string positions = m.at("positions");
    BOOST_REQUIRE_MESSAGE(positions == "learned" || positions == "rotary" || positions == "none",
                          file << ": positions " << positions);
    shape.positions = positions == "rotary" ? nn::PositionKind::rotary
                      : positions == "none" ? nn::PositionKind::none
                                            : nn::PositionKind::learned;
  }
  if (m.contains("rotary_fraction")) shape.rotary_fraction = m.at("rotary_fraction");
  if (m.contains("rotary_base")) shape.rotary_base = m.at("rotary_base");
  if (m.contains("qk_norm")) shape.qk_norm = m.at("qk_norm");
  if (m.contains("n_kv_heads")) shape.n_kv_heads = m.at("n_kv_heads");
  if (m.contains("attn_window")) shape.attn_window = m.at("attn_window").get<std::vector<int64_t>>();
  if (m.contains("attn_scale")) {
    const std::string scale = m.at("attn_scale");
    BOOST_REQUIRE_MESSAGE(scale == "sqrt_dk" || scale == "none", file << ": attn_scale " << scale);
    shape.attn_scale = scale == "none" ? nn::AttnScale::none : nn::AttnScale::sqrt_dk;
  }
  if (m.contains("activation")) {
    const std::string a = m.at("activation");
    const std::map<std::string, nn::Activation> kinds = {
        {"gelu", nn::Activation::gelu},   {"relu", nn::Activation::relu},
        {"relu2", nn::Activation::relu2}, {"swiglu", nn::Activation::swiglu},
        {"geglu", nn::Activation::geglu}, {"gelu_erf", nn::Activation::gelu_erf}};
    BOOST_REQUIRE_MESSAGE(kinds.count(a) == 1, file << ": activation " << a);
    shape.activation = kinds.at(a);
  }
  if (m.contains("parallel")) shape.parallel = m.at("parallel");
  if (m.contains("tie_embeddings")) shape.tie_embeddings = m.at("tie_embeddings");
  if (m.contains("logit_softcap")) shape.logit_softcap = m.at("logit_softcap");
  ag::Rng rng(0);
  nn::CausalLM<float> model(shape, rng);
  load_parameters(model, fx);
  nn::Hooks<float> hooks;
  for (size_t l = 0; l < model.blocks.size(); ++l) hooks.capture(nn::hook_name(nn::Point::attn_pattern, l));
  const int64_t B = m.at("batch"), T = m.at("seq_len");
  const std::vector<int32_t> tokens = m.at("tokens"), targets = m.at("targets");

  F logits = model.forward(tokens, B, T, {}, reference ? &hooks : nullptr);
  F loss = ag::cross_entropy(logits, targets, -1);
  expect_close(file + " logits", logits, fx.tensor<double>("logits"), 1e-4);
  expect_close(file + " loss", loss, fx.tensor<double>("loss"), 1e-4);
  for (size_t l = 0; reference && l < model.blocks.size(); ++l)
    expect_close(file + " attn." + std::to_string(l),
                 hooks.captured(nn::hook_name(nn::Point::attn_pattern, l)),
                 fx.tensor<double>("attn." + std::to_string(l)), 1e-4);

  loss.backward();
  int checked = 0;
  for (auto& p : model.named_parameters()) {
    expect_close(file + " grad." + p.name, p.tensor->grad_tensor(), fx.tensor<double>("grad." + p.name),
                 1e-4);
    ++checked;
  }
  BOOST_TEST(checked == static_cast<int>(model.named_parameters().size()));
}

BOOST_AUTO_TEST_CASE(two_layer_causal_lm_matches_torch_logits_loss_and_every_gradient) {
  check_causal_lm("causal_lm.json", /*reference=*/true);
  check_causal_lm("causal_lm.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(rms_norm_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_rms.json", /*reference=*/true);
  check_causal_lm("causal_lm_rms.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(rotary_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_rotary.json", /*reference=*/true);
  check_causal_lm("causal_lm_rotary.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(no_positions_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_nope.json", /*reference=*/true);
  check_causal_lm("causal_lm_nope.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(unscaled_attention_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_unscaled.json", /*reference=*/true);
  check_causal_lm("causal_lm_unscaled.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(qk_norm_rotary_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_qk_norm.json", /*reference=*/true);
  check_causal_lm("causal_lm_qk_norm.json", /*reference=*/false);
}

// Grouped-query attention (4 query heads reading 2 kv heads) and local attention (windows [3, 0]).
BOOST_AUTO_TEST_CASE(grouped_query_and_local_attention_causal_lms_match_torch) {
  for (const std::string file : {"causal_lm_gqa.json", "causal_lm_window.json"}) {
    check_causal_lm(file, /*reference=*/true);
    check_causal_lm(file, /*reference=*/false);
  }
}

// configs/modern.json's options at once: RMSNorm, rotary, QK-norm, SwiGLU, 4 query heads on 2 kv heads.
BOOST_AUTO_TEST_CASE(the_modern_config_s_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_modern.json", /*reference=*/true);
  check_causal_lm("causal_lm_modern.json", /*reference=*/false);
}

BOOST_AUTO_TEST_CASE(relu2_swiglu_geglu_and_gelu_erf_causal_lms_match_torch) {
  for (const std::string file :
       {"causal_lm_relu2.json", "causal_lm_swiglu.json", "causal_lm_geglu.json", "causal_lm_gelu_erf.json"}) {
    check_causal_lm(file, /*reference=*/true);
    check_causal_lm(file, /*reference=*/false);
  }
}

// Parallel attention and MLP, tied embeddings (one parameter: its gradient sums both uses), soft-capped
// logits.
BOOST_AUTO_TEST_CASE(parallel_tied_and_softcap_causal_lms_match_torch) {
  for (const std::string file :
       {"causal_lm_parallel.json", "causal_lm_tied.json", "causal_lm_softcap.json"}) {
    check_causal_lm(file, /*reference=*/true);
    check_causal_lm(file, /*reference=*/false);
  }
}

BOOST_AUTO_TEST_CASE(attention_only_causal_lm_matches_torch) {
  check_causal_lm("causal_lm_attn_only.json", /*reference=*/true);
  check_causal_lm("causal_lm_attn_only.json", /*reference=*/false);
}
