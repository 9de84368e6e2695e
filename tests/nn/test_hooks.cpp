// Activation hooks on CausalLM: capturing every point gives tensors of the documented shapes; patching every
// point with its own captured value changes no bit; a hook on the pattern (composed attention path) gives
// the same logits as the fused path; without hooks at attn.out, mlp.out and ln_f.out the residual adds
// fused into Wo and fc2 and ln_f fused into lm_head give the hooked (unfused) path's logits and gradients,
// and the graph holds two (B, T, D) tensors fewer per block and one fewer for ln_f; patching one head's z at
// one position changes the logits only at that position and after it (causality); replacements carry
// gradients; a misspelt point is an error.
#define BOOST_TEST_MODULE hooks
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/transformer.h"

namespace {

nn::ModelShape shape(bool attention_only = false) {
  nn::ModelShape s;
  s.vocab = 11;
  s.max_len = 8;
  s.d_model = 16;
  s.n_heads = 4;
  s.n_layers = 2;
  s.d_ff = 32;
  s.attention_only = attention_only;
  return s;
}

const std::vector<int32_t> kA = {0, 3, 5, 2, 6, 4, 9, 1, /* second sequence */ 0, 7, 7, 2, 10, 4, 3, 8};
const std::vector<int32_t> kB = {0, 3, 8, 2, 1, 4, 9, 5, /* second sequence */ 0, 2, 7, 6, 10, 4, 1, 8};
constexpr int64_t kBatch = 2, kT = 8;

template <typename T>
ag::Tensor<T> logits_of(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids,
                        nn::Hooks<T>* hooks = nullptr) {
  ag::NoGradScope no_grad;
  return model.forward(ids, kBatch, kT, {}, hooks);
}

template <typename T>
double max_abs_diff(const ag::Tensor<T>& a, const ag::Tensor<T>& b) {
  BOOST_TEST_REQUIRE((a.shape() == b.shape()));
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_point_has_its_documented_shape) {
  ag::Rng rng(1);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> hooks;
  for (const std::string& p : model.hook_points()) hooks.capture(p);
  logits_of(model, kA, &hooks);
  const int64_t D = 16, H = 4, dk = 4;
  for (const std::string l : {"blocks.0.", "blocks.1."}) {
    BOOST_TEST((hooks.captured(l + "attn.pattern").shape() == ag::Shape{kBatch, H, kT, kT}));
    BOOST_TEST((hooks.captured(l + "attn.z").shape() == ag::Shape{kBatch, kT, H, dk}));
    for (const char* p : {"resid_pre", "attn.out", "resid_mid", "mlp.out", "resid_post"})
      BOOST_TEST((hooks.captured(l + p).shape() == ag::Shape{kBatch, kT, D}), l + p);
  }
  BOOST_TEST((hooks.captured("ln_f.out").shape() == ag::Shape{kBatch, kT, D}));
  BOOST_TEST((hooks.captured("logits").shape() == ag::Shape{kBatch, kT, 11}));
  // The residual stream adds up: resid_mid = resid_pre + attn.out, resid_post = resid_mid + mlp.out.
  const auto sum = ag::add(hooks.captured("blocks.1.resid_pre"), hooks.captured("blocks.1.attn.out"));
  BOOST_TEST(max_abs_diff(sum, hooks.captured("blocks.1.resid_mid")) == 0.0);
  // The pattern's rows sum to 1 and the causal mask holds.
  const ag::Tensor<float>& pattern = hooks.captured("blocks.0.attn.pattern");
  for (int64_t row = 0; row < kBatch * H * kT; ++row) {
    const int64_t i = row % kT;
    double s = 0;
    for (int64_t j = 0; j < kT; ++j) {
      const float w = pattern.data()[row * kT + j];
      if (j > i) BOOST_TEST(w == 0.0f);
      s += w;
    }
    BOOST_TEST(s == 1.0, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(patching_every_point_with_its_own_value_changes_no_bit) {
  for (bool attention_only : {false, true}) {
    ag::Rng rng(2);
    const nn::CausalLM<float> model(shape(attention_only), rng);
    nn::Hooks<float> capture;
    for (const std::string& p : model.hook_points()) capture.capture(p);
    const ag::Tensor<float> base = logits_of(model, kA, &capture);
    nn::Hooks<float> patch;
    for (const std::string& p : model.hook_points()) patch.patch(p, capture.captured(p));
    BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &patch)) == 0.0);
    nn::Hooks<float> partial;  // and position-wise patches at every position but one
    for (const std::string& p : model.hook_points())
      if (p.find("pattern") == std::string::npos)
        partial.patch_positions(p, {0, 1, 2, 3, 4, 5, 6}, capture.captured(p));
    BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &partial)) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(the_composed_path_of_a_pattern_hook_gives_the_fused_paths_logits) {
  ag::Rng rng(3);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> hooks;
  hooks.capture("blocks.0.attn.pattern");
  hooks.capture("blocks.1.attn.pattern");
  BOOST_TEST(max_abs_diff(logits_of(model, kA), logits_of(model, kA, &hooks)) <= 1e-6);

  ag::Rng rng64(3);
  const nn::CausalLM<double> model64(shape(), rng64);
  nn::Hooks<double> hooks64;
  hooks64.capture("blocks.1.attn.pattern");
  BOOST_TEST(max_abs_diff(logits_of(model64, kA), logits_of(model64, kA, &hooks64)) <= 1e-12);
}

// Hooks at every attn.out and mlp.out and at ln_f.out: the path where Wo's, fc2's and ln_f's outputs are
// tensors of their own.
template <typename T>
void hook_projections(nn::Hooks<T>& hooks) {
  for (const std::string l : {"blocks.0.", "blocks.1."}) {
    hooks.capture(l + "attn.out");
    hooks.capture(l + "mlp.out");
  }
  hooks.capture("ln_f.out");
}

BOOST_AUTO_TEST_CASE(the_fused_paths_give_the_unfused_paths_logits_and_gradients) {
  ag::Rng rng(8);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> hooks;
  hook_projections(hooks);
  BOOST_TEST(max_abs_diff(logits_of(model, kA), logits_of(model, kA, &hooks)) <= 1e-6);

  ag::Rng rng64(8);
  nn::CausalLM<double> model64(shape(), rng64);
  const std::vector<int32_t> targets(kB.begin(), kB.end());
  auto gradients = [&](nn::Hooks<double>* h) {
    model64.zero_grad();
    ag::Tensor<double> logits = model64.forward(kA, kBatch, kT, {}, h);
    ag::cross_entropy(logits, targets, -1).backward();
    std::vector<double> all = logits.to_vector();
    for (const auto& p : model64.named_parameters()) {
      const std::vector<double> g = p.tensor->grad_tensor().to_vector();
      all.insert(all.end(), g.begin(), g.end());
    }
    return all;
  };
  nn::Hooks<double> hooks64;
  hook_projections(hooks64);
  const std::vector<double> fused = gradients(nullptr), unfused = gradients(&hooks64);
  BOOST_TEST_REQUIRE(fused.size() == unfused.size());
  double worst = 0;
  for (size_t i = 0; i < fused.size(); ++i) worst = std::max(worst, std::fabs(fused[i] - unfused[i]));
  BOOST_TEST(worst <= 1e-12);
}

BOOST_AUTO_TEST_CASE(a_training_forward_holds_no_projection_or_ln_f_output_of_its_own) {
  ag::Rng rng(9);
  const nn::CausalLM<float> model(shape(), rng);
  auto held_by_graph = [&](nn::Hooks<float>* h) {
    const int64_t before = ag::detail::storage_live_bytes();
    const ag::Tensor<float> logits = model.forward(kA, kBatch, kT, {}, h);
    return ag::detail::storage_live_bytes() - before;
  };
  nn::Hooks<float> hooks;  // capturing keeps the tensors the graph holds anyway: no bytes of its own
  hook_projections(hooks);
  const int64_t blocks = 2, D = 16;
  BOOST_TEST(held_by_graph(&hooks) - held_by_graph(nullptr) ==
             (2 * blocks + 1) * kBatch * kT * D * int64_t(sizeof(float)));
}

BOOST_AUTO_TEST_CASE(patching_one_heads_z_at_one_position_changes_that_position_and_later_only) {
  ag::Rng rng(4);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> clean;
  clean.capture("blocks.0.attn.z");
  logits_of(model, kB, &clean);
  const ag::Tensor<float> base = logits_of(model, kA);
  for (int64_t pos : {2, 3, 7}) {  // where the two inputs differ by then
    nn::Hooks<float> patch;        // head 2's output at `pos`, taken from the other input
    patch.patch_head("blocks.0.attn.z", 2, {pos}, clean.captured("blocks.0.attn.z"));
    const ag::Tensor<float> patched = logits_of(model, kA, &patch);
    const int64_t V = 11;
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t t = 0; t < kT; ++t) {
        double d = 0;
        for (int64_t v = 0; v < V; ++v) {
          const int64_t i = (b * kT + t) * V + v;
          d = std::max(d, double(std::fabs(patched.data()[i] - base.data()[i])));
        }
        if (t < pos)
          BOOST_TEST(d == 0.0, "batch " << b << " position " << t << " before the patch at " << pos);
        if (t == pos) BOOST_TEST(d > 1e-4, "batch " << b << " patched position " << t);
      }
  }
}

BOOST_AUTO_TEST_CASE(patch_head_touches_only_that_head) {
  ag::Rng rng(5);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> hooks;
  hooks.patch_head("blocks.1.attn.z", 1, {}, ag::Tensor<float>::zeros({kT, 4, 4}));
  hooks.capture("blocks.1.attn.z");
  nn::Hooks<float> plain;
  plain.capture("blocks.1.attn.z");
  logits_of(model, kA, &hooks);
  logits_of(model, kA, &plain);
  const ag::Tensor<float>&z = hooks.captured("blocks.1.attn.z"), &z0 = plain.captured("blocks.1.attn.z");
  for (int64_t i = 0; i < z.numel(); ++i) {
    const int64_t head = i / 4 % 4;
    if (head == 1)
      BOOST_TEST(z.data()[i] == 0.0f);
    else
      BOOST_TEST(z.data()[i] == z0.data()[i]);
  }
}

BOOST_AUTO_TEST_CASE(gradients_flow_through_a_replacement) {
  ag::Rng rng(6);
  const nn::CausalLM<double> model(shape(), rng);
  // d loss / d(replacement) by backward, against a central difference on one element.
  nn::Hooks<double> capture;
  capture.capture("blocks.0.resid_mid");
  {
    ag::NoGradScope no_grad;
    model.forward(kB, kBatch, kT, {}, &capture);
  }
  ag::Tensor<double> source =
      ag::Tensor<double>::from(capture.captured("blocks.0.resid_mid").shape(),
                               capture.captured("blocks.0.resid_mid").to_vector(), true);
  const std::vector<int32_t> targets(kA.begin(), kA.end());
  auto loss_with = [&](const ag::Tensor<double>& src) {
    nn::Hooks<double> patch;
    patch.patch_positions("blocks.0.resid_mid", {5}, src);
    return ag::cross_entropy(model.forward(kA, kBatch, kT, {}, &patch), targets, -1);
  };
  ag::Tensor<double> loss = loss_with(source);
  loss.backward();
  const std::vector<double> grad = source.grad_tensor().to_vector();
  const int64_t D = 16;
  const int64_t inside = (0 * kT + 5) * D + 3, outside = (1 * kT + 2) * D + 3;  // position 5 vs position 2
  BOOST_TEST(grad[outside] == 0.0);
  const double eps = 1e-6;
  std::vector<double> plus = source.to_vector(), minus = plus;
  plus[inside] += eps;
  minus[inside] -= eps;
  ag::NoGradScope no_grad;
  const double numeric = (loss_with(ag::Tensor<double>::from(source.shape(), plus)).item() -
                          loss_with(ag::Tensor<double>::from(source.shape(), minus)).item()) /
                         (2 * eps);
  BOOST_TEST(std::fabs(numeric) > 1e-6);
  BOOST_TEST(grad[inside] == numeric, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(bad_hooks_are_one_line_errors) {
  ag::Rng rng(7);
  const nn::CausalLM<float> model(shape(/*attention_only=*/true), rng);
  nn::Hooks<float> typo;
  typo.capture("blocks.0.attn.patern");
  BOOST_CHECK_THROW(logits_of(model, kA, &typo), std::invalid_argument);
  nn::Hooks<float> no_mlp;  // an attention-only model has no MLP
  no_mlp.capture("blocks.0.mlp.out");
  BOOST_CHECK_THROW(logits_of(model, kA, &no_mlp), std::invalid_argument);
  nn::Hooks<float> wrong_shape;
  wrong_shape.patch("blocks.1.resid_pre", ag::Tensor<float>::zeros({1, 2, 3}));
  BOOST_CHECK_THROW(logits_of(model, kA, &wrong_shape), std::invalid_argument);
  nn::Hooks<float> bad_position;
  bad_position.patch_positions("blocks.1.resid_pre", {8}, ag::Tensor<float>::zeros({kT, 16}));
  BOOST_CHECK_THROW(logits_of(model, kA, &bad_position), std::invalid_argument);
  nn::Hooks<float> no_head_axis;
  BOOST_CHECK_THROW(no_head_axis.patch_head("blocks.1.resid_pre", 0, {}, ag::Tensor<float>::zeros({kT, 16})),
                    std::invalid_argument);
  nn::Hooks<float> none;
  BOOST_CHECK_THROW(none.captured("logits"), std::out_of_range);
}
