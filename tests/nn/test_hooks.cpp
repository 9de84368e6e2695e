// Activation hooks on CausalLM, for every point of nn/hook_points.h's table: docs/architecture.md's table
// is the code's; capturing every point gives tensors of the documented shapes and values that agree with
// each other (the residual adds, the LayerNorm scales, the pattern); patching every point with its own
// captured value changes no bit; the training forward (fused ops) gives the reference forward's logits and
// gradients and holds less memory; patching one head at one position changes the logits only at that
// position and after it (causality), and patch_head touches only that head of every point with a head axis;
// the gradient through every point's replacement matches finite differences in float64, and so does the
// gradient kept at every point by Hooks::grad (all points at once, with and without parameter gradients);
// a misspelt point is an error.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
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

// The model's variants: the default, attention-only, the grokking model's (no LayerNorm, ReLU, no
// biases), each of issue 41's options, and the exact GELU of imported Pythia and nanoGPT models.
std::vector<nn::ModelShape> variants() {
  nn::ModelShape bare = shape();
  bare.norm = nn::NormKind::none;
  bare.activation = nn::Activation::relu;
  bare.bias = false;
  nn::ModelShape rms = shape(), relu2 = shape(), swiglu = shape(), geglu = shape();
  rms.norm = nn::NormKind::rms;
  nn::ModelShape rotary = shape();  // 2 of each head's 4 dims: partial rotary
  rotary.positions = nn::PositionKind::rotary;
  rotary.rotary_fraction = 0.5;
  rotary.rotary_base = 100;
  nn::ModelShape nope = shape();
  nope.positions = nn::PositionKind::none;
  nn::ModelShape unscaled = shape();
  unscaled.attn_scale = nn::AttnScale::none;
  nn::ModelShape qk = rotary;
  qk.qk_norm = true;
  relu2.activation = nn::Activation::relu2;
  swiglu.activation = nn::Activation::swiglu, swiglu.norm = nn::NormKind::rms;
  geglu.activation = nn::Activation::geglu, geglu.bias = false;
  nn::ModelShape gelu_erf = shape();  // GPT-NeoX's exact GELU, in a parallel block as Pythia's
  gelu_erf.activation = nn::Activation::gelu_erf, gelu_erf.parallel = true;
  nn::ModelShape parallel = shape(), tied = shape(), combined = swiglu;
  parallel.parallel = true;
  tied.tie_embeddings = true, tied.logit_softcap = 2.0;
  combined.parallel = true, combined.tie_embeddings = true, combined.logit_softcap = 3.0,
  combined.bias = false;
  // Grouped-query attention (2 kv heads for 4 query heads) with a local first layer; multi-query attention
  // (one kv head) with local layers; and every option at once.
  nn::ModelShape gqa = shape(), mqa = shape(), every = qk;
  gqa.n_kv_heads = 2, gqa.attn_window = {2, 0};
  mqa.n_kv_heads = 1, mqa.attn_window = {3};
  every.norm = nn::NormKind::rms, every.activation = nn::Activation::swiglu, every.n_kv_heads = 2,
  every.attn_window = {0, 3}, every.attn_scale = nn::AttnScale::none, every.parallel = true,
  every.tie_embeddings = true, every.logit_softcap = 3.0;
  return {shape(),  shape(/*attention_only=*/true),
          bare,     rms,
          rotary,   nope,
          unscaled, qk,
          relu2,    swiglu,
          geglu,    parallel,
          tied,     combined,
          gqa,      mqa,
          every,    gelu_erf};
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

// "(B, H, T, S)" -> {2, 4, 8, 8} at this file's model shape.
ag::Shape shape_of(const std::string& text, int64_t kv_heads = 4) {
  const std::map<std::string, int64_t> size = {{"B", kBatch},     {"T", kT}, {"S", kT}, {"H", 4},
                                               {"Hkv", kv_heads}, {"dk", 4}, {"D", 16}, {"F", 32},
                                               {"V", 11},         {"1", 1}};
  ag::Shape out;
  std::string inner = text.substr(1, text.size() - 2), letter;
  std::istringstream in(inner);
  while (std::getline(in, letter, ',')) {
    letter.erase(0, letter.find_first_not_of(' '));
    BOOST_TEST_REQUIRE(size.count(letter) == 1u, "unknown dimension " << letter << " in " << text);
    out.push_back(size.at(letter));
  }
  return out;
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

BOOST_AUTO_TEST_CASE(the_contracts_table_is_the_codes_table) {
  // docs/architecture.md "Hook points": one row per point, `name` | shape | meaning, in the table's order.
  std::ifstream doc(std::string(ATTOGRAD_SOURCE_DIR) + "/docs/architecture.md");
  BOOST_TEST_REQUIRE(doc.good());
  std::vector<std::string> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(doc, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Hook points";
    if (in_section && line.rfind("| `", 0) == 0) rows.push_back(line);
  }
  std::vector<std::string> expected;
  for (const nn::HookPoint& row : nn::kHookPoints)
    expected.push_back(std::string("| `") + (row.in_block ? "blocks.L." : "") + row.name + "` | " +
                       row.shape + " | " + row.meaning + nn::needs_note(row.needs) + " |");
  std::string want;
  for (const std::string& e : expected) want += e + "\n";
  BOOST_TEST(rows == expected, "docs/architecture.md's Hook points table should read:\n" << want);
}

BOOST_AUTO_TEST_CASE(every_point_has_its_documented_shape) {
  for (const nn::ModelShape& variant : variants()) {
    ag::Rng rng(1);
    const nn::CausalLM<float> model(variant, rng);
    nn::Hooks<float> hooks;
    const std::vector<std::string> points = model.hook_points();
    // Every row of the table in each block (or once, outside the blocks), but the MLP's where there is none.
    for (const nn::HookPoint& row : nn::kHookPoints)
      for (size_t l = 0; l < (row.in_block ? 2u : 1u); ++l) {
        const bool present = std::count(points.begin(), points.end(), nn::hook_name(row.point, l)) == 1;
        const bool mlp_point = row.needs == nn::Needs::mlp || row.needs == nn::Needs::mlp_norm;
        const bool ln_point = row.needs == nn::Needs::norm || row.needs == nn::Needs::mlp_norm;
        const bool gate_point = row.needs == nn::Needs::gated;
        const bool absent =
            (variant.attention_only && (mlp_point || gate_point)) ||
            (!nn::has_norm(variant.norm) && ln_point) || (gate_point && !nn::mlp_gated(variant.activation)) ||
            row.needs == nn::Needs::on_request ||
            (row.needs == nn::Needs::learned && variant.positions != nn::PositionKind::learned);
        BOOST_TEST(present == !absent, nn::hook_name(row.point, l));
      }
    for (const std::string& p : points) hooks.capture(p);
    logits_of(model, kA, &hooks);
    for (const std::string& p : points) {
      const nn::HookPoint* row = nn::find_hook_point(p);
      BOOST_TEST_REQUIRE(row != nullptr, p);
      BOOST_TEST((hooks.captured(p).shape() == shape_of(row->shape, nn::kv_heads(variant))), p);
    }
  }
}

// RMSNorm's scale is 1 / sqrt(mean(x^2) + eps) of its input row, not centred; its output is x * scale *
// weight.
BOOST_AUTO_TEST_CASE(rms_norm_scale_is_the_root_mean_square) {
  nn::ModelShape s = shape();
  s.norm = nn::NormKind::rms, s.norm_eps = 1e-6;
  ag::Rng rng(1);
  const nn::CausalLM<double> model(s, rng);
  for (double& w : model.blocks[1]->ln2->weight.values()) w += 0.1 * rng.normal();
  nn::Hooks<double> hooks;
  for (const std::string& p : model.hook_points()) hooks.capture(p);
  logits_of(model, kA, &hooks);
  auto at = [&](const std::string& p) -> const ag::Tensor<double>& { return hooks.captured(p); };
  const int64_t D = 16;
  const std::vector<double> w = model.blocks[1]->ln2->weight.to_vector();
  for (int64_t r = 0; r < kBatch * kT; ++r) {
    const double* x = at("blocks.1.resid_mid").data() + r * D;
    double ms = 0;
    for (int64_t i = 0; i < D; ++i) ms += x[i] * x[i] / D;
    const double scale = 1 / std::sqrt(ms + 1e-6);
    BOOST_TEST(at("blocks.1.ln2.scale").data()[r] == scale, boost::test_tools::tolerance(1e-12));
    for (int64_t i = 0; i < D; ++i)
      BOOST_TEST(at("blocks.1.ln2.out").data()[r * D + i] == x[i] * scale * w[i],
                 boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(captured_values_agree_with_each_other) {
  ag::Rng rng(1);
  const nn::CausalLM<double> model(shape(), rng);
  nn::Hooks<double> hooks;
  for (const std::string& p : model.hook_points()) hooks.capture(p);
  logits_of(model, kA, &hooks);
  auto at = [&](const std::string& p) -> const ag::Tensor<double>& { return hooks.captured(p); };
  // The residual stream adds up, to the bit: resid_mid = resid_pre + attn.out, resid_post = resid_mid +
  // mlp.out.
  BOOST_TEST(max_abs_diff(ag::add(at("blocks.1.resid_pre"), at("blocks.1.attn.out")),
                          at("blocks.1.resid_mid")) == 0.0);
  BOOST_TEST(max_abs_diff(ag::add(at("blocks.0.resid_mid"), at("blocks.0.mlp.out")),
                          at("blocks.0.resid_post")) == 0.0);
  BOOST_TEST(max_abs_diff(at("blocks.0.resid_post"), at("blocks.1.resid_pre")) == 0.0);
  // Each LayerNorm's scale is 1 / std of its input row (biased variance, eps 1e-5), computed here apart.
  const std::vector<std::pair<std::string, std::string>> norms = {
      {"blocks.0.resid_pre", "blocks.0.ln1.scale"},
      {"blocks.1.resid_mid", "blocks.1.ln2.scale"},
      {"blocks.1.resid_post", "ln_f.scale"}};
  const int64_t D = 16;
  for (const auto& [input, scale] : norms)
    for (int64_t r = 0; r < kBatch * kT; ++r) {
      const double* x = at(input).data() + r * D;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < D; ++i) mean += x[i] / D;
      for (int64_t i = 0; i < D; ++i) var += (x[i] - mean) * (x[i] - mean) / D;
      BOOST_TEST(at(scale).data()[r] == 1 / std::sqrt(var + 1e-5), boost::test_tools::tolerance(1e-12));
    }
  // mlp.post = gelu(mlp.pre); the pattern is the masked softmax of the scores, its rows sum to 1.
  BOOST_TEST(max_abs_diff(ag::gelu(at("blocks.0.mlp.pre")), at("blocks.0.mlp.post")) == 0.0);
  const ag::Tensor<double>&scores = at("blocks.0.attn.scores"), &pattern = at("blocks.0.attn.pattern");
  const int64_t H = 4;
  for (int64_t row = 0; row < kBatch * H * kT; ++row) {
    const int64_t i = row % kT;
    double max = -1e300, z = 0, total = 0;
    for (int64_t j = 0; j <= i; ++j) max = std::max(max, scores.data()[row * kT + j]);
    for (int64_t j = 0; j <= i; ++j) z += std::exp(scores.data()[row * kT + j] - max);
    for (int64_t j = 0; j < kT; ++j) {
      const double w = pattern.data()[row * kT + j];
      if (j > i)
        BOOST_TEST(w == 0.0);
      else
        BOOST_TEST(w == std::exp(scores.data()[row * kT + j] - max) / z, boost::test_tools::tolerance(1e-12));
      total += w;
    }
    BOOST_TEST(total == 1.0, boost::test_tools::tolerance(1e-12));
  }
}

// embed + pos_embed is the first residual; attn.result, computed when asked for, sums over heads (plus Wo's
// bias) to attn.out, leaves the logits as they are when only read, and zeroing one head of it is zeroing
// that head's z.
BOOST_AUTO_TEST_CASE(the_embeddings_and_each_heads_result_add_up) {
  ag::Rng rng(3);
  const nn::CausalLM<double> model(shape(), rng);
  nn::Hooks<double> plain;
  const ag::Tensor<double> base = logits_of(model, kA, &plain);
  nn::Hooks<double> hooks;
  for (const char* p :
       {"embed", "pos_embed", "blocks.0.resid_pre", "blocks.1.attn.result", "blocks.1.attn.out"})
    hooks.capture(p);
  BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &hooks)) == 0.0);
  auto at = [&](const std::string& p) -> const ag::Tensor<double>& { return hooks.captured(p); };
  BOOST_TEST(max_abs_diff(ag::add(at("embed"), at("pos_embed")), at("blocks.0.resid_pre")) == 0.0);
  BOOST_TEST((at("blocks.1.attn.result").shape() == ag::Shape{kBatch, kT, 4, 16}));
  BOOST_TEST(max_abs_diff(ag::add(ag::sum(at("blocks.1.attn.result"), 2), model.blocks[1]->attn.wo.bias),
                          at("blocks.1.attn.out")) <= 1e-12);
  const ag::Tensor<double> zero_head = ag::Tensor<double>::zeros({kT, 4, 16});
  nn::Hooks<double> by_result, by_z;
  by_result.patch_head("blocks.1.attn.result", 2, {}, zero_head);
  by_z.patch_head("blocks.1.attn.z", 2, {}, ag::Tensor<double>::zeros({kT, 4, 4}));
  const ag::Tensor<double> a = logits_of(model, kA, &by_result), b = logits_of(model, kA, &by_z);
  BOOST_TEST(max_abs_diff(a, b) <= 1e-12);
  BOOST_TEST(max_abs_diff(a, base) > 1e-6);
}

BOOST_AUTO_TEST_CASE(patching_every_point_with_its_own_value_changes_no_bit) {
  for (const nn::ModelShape& variant : variants()) {
    ag::Rng rng(2);
    const nn::CausalLM<float> model(variant, rng);
    nn::Hooks<float> capture;
    for (const std::string& p : model.hook_points()) capture.capture(p);
    const ag::Tensor<float> base = logits_of(model, kA, &capture);
    nn::Hooks<float> none;
    BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &none)) == 0.0);
    nn::Hooks<float> patch;
    for (const std::string& p : model.hook_points()) patch.patch(p, capture.captured(p));
    BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &patch)) == 0.0);
    nn::Hooks<float> partial;  // and position-wise patches at every position but one
    for (const std::string& p : model.hook_points())
      partial.patch_positions(p, {0, 1, 2, 3, 4, 5, 6}, capture.captured(p));
    BOOST_TEST(max_abs_diff(base, logits_of(model, kA, &partial)) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(the_training_forward_gives_the_reference_forwards_logits_and_gradients) {
  for (const nn::ModelShape& variant : variants()) {
    ag::Rng rng(8);
    const nn::CausalLM<float> model(variant, rng);
    nn::Hooks<float> reference;  // any Hooks object selects the reference forward
    BOOST_TEST(max_abs_diff(logits_of(model, kA), logits_of(model, kA, &reference)) <= 1e-5);

    ag::Rng rng64(8);
    nn::CausalLM<double> model64(variant, rng64);
    const std::vector<int32_t> targets(kB.begin(), kB.end());
    const std::vector<uint8_t> padding = {0, 0, 0, 0, 0, 0, 1, 1, /* second */ 0, 0, 0, 0, 0, 0, 0, 1};
    auto gradients = [&](nn::Hooks<double>* h) {
      model64.zero_grad();
      ag::Tensor<double> logits = model64.forward(kA, kBatch, kT, padding, h);
      ag::cross_entropy(logits, targets, -1).backward();
      std::vector<double> all = logits.to_vector();
      for (const auto& p : model64.named_parameters()) {
        const std::vector<double> g = p.tensor->grad_tensor().to_vector();
        all.insert(all.end(), g.begin(), g.end());
      }
      return all;
    };
    nn::Hooks<double> reference64;
    const std::vector<double> fused = gradients(nullptr), composed = gradients(&reference64);
    BOOST_TEST_REQUIRE(fused.size() == composed.size());
    double worst = 0;
    for (size_t i = 0; i < fused.size(); ++i) worst = std::max(worst, std::fabs(fused[i] - composed[i]));
    BOOST_TEST(worst <= 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(a_training_forward_holds_no_projection_or_ln_f_output_of_its_own) {
  ag::Rng rng(9);
  const nn::CausalLM<float> model(shape(), rng);
  auto held_by_graph = [&](nn::Hooks<float>* h) {
    const int64_t before = ag::detail::storage_live_bytes();
    const ag::Tensor<float> logits = model.forward(kA, kBatch, kT, {}, h);
    return ag::detail::storage_live_bytes() - before;
  };
  // The reference keeps at least attn.out and mlp.out per block and ln_f.out, which the training forward
  // never makes, besides its scores, split heads and LayerNorm parts.
  nn::Hooks<float> reference;
  const int64_t blocks = 2, D = 16;
  BOOST_TEST(held_by_graph(&reference) - held_by_graph(nullptr) >=
             (2 * blocks + 1) * kBatch * kT * D * int64_t(sizeof(float)));
}

BOOST_AUTO_TEST_CASE(patching_one_heads_z_at_one_position_changes_that_position_and_later_only) {
  ag::Rng rng(4);
  const nn::CausalLM<float> model(shape(), rng);
  nn::Hooks<float> clean;
  clean.capture("blocks.0.attn.z");
  logits_of(model, kB, &clean);
  nn::Hooks<float> none;  // the reference forward, as the patched runs
  const ag::Tensor<float> base = logits_of(model, kA, &none);
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

BOOST_AUTO_TEST_CASE(patch_head_touches_only_that_head_of_every_point_with_a_head_axis) {
  ag::Rng rng(5);
  const nn::CausalLM<float> model(shape(), rng);
  for (const nn::HookPoint& row : nn::kHookPoints) {
    if (row.head_axis < 0) continue;
    const std::string point = nn::hook_name(row.point, 1);
    nn::Hooks<float> plain;
    plain.capture(point);
    logits_of(model, kA, &plain);
    const ag::Tensor<float>& v0 = plain.captured(point);
    const ag::Shape per_entry(v0.shape().begin() + 1, v0.shape().end());
    nn::Hooks<float> hooks;
    hooks.patch_head(point, 1, {}, ag::Tensor<float>::zeros(per_entry));
    hooks.capture(point);
    logits_of(model, kA, &hooks);
    const ag::Tensor<float>& v = hooks.captured(point);
    int64_t stride = 1;  // of the head axis
    for (size_t d = row.head_axis + 1; d < v.shape().size(); ++d) stride *= v.shape()[d];
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (i / stride % 4 == 1)
        BOOST_TEST(v.data()[i] == 0.0f, point << " " << i);
      else
        BOOST_TEST(v.data()[i] == v0.data()[i], point << " " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_through_every_points_replacement_match_finite_differences) {
  for (const nn::ModelShape& variant : variants()) {
    ag::Rng rng(6);
    const nn::CausalLM<double> model(variant, rng);
    nn::Hooks<double> capture;
    for (const std::string& p : model.hook_points()) capture.capture(p);
    {
      ag::NoGradScope no_grad;
      model.forward(kB, kBatch, kT, {}, &capture);
    }
    const std::vector<int32_t> targets(kA.begin(), kA.end());
    for (const std::string& p : model.hook_points()) {
      // The whole value at p replaced by a leaf, the loss differentiated with respect to it.
      const ag::Tensor<double>& value = capture.captured(p);
      auto loss_of = [&](const std::vector<ag::Tensor<double>>& in) {
        nn::Hooks<double> patch;
        patch.patch(p, in[0]);
        return ag::cross_entropy(model.forward(kA, kBatch, kT, {}, &patch), targets, -1);
      };
      // 48 elements of each value drawn at random (of 256 to 2,048): every point of every variant is
      // checked, at a fraction of the evaluations (the sanitizer runs' longest test otherwise).
      ag::GradcheckOptions options;
      options.max_elements = 48;
      const ag::GradcheckResult r =
          ag::gradcheck(loss_of, {ag::Tensor<double>::from(value.shape(), value.to_vector(), true)}, options);
      BOOST_TEST(r.worst() < 1e-6, p << ": " << r.report({p}));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_gradient_kept_at_every_point_matches_finite_differences) {
  // d metric / d(value at p) from one backward with a probe at every point at once, against central
  // differences of the metric with one element of p's value nudged by a hook. The metric mixes a logit
  // difference at the last position with the loss, so every position and the softmax matter.
  const std::vector<int32_t> targets(kA.begin(), kA.end());
  auto metric_of = [&](const ag::Tensor<double>& logits) {
    const int64_t V = 11;
    std::vector<double> pick(static_cast<size_t>(logits.numel()), 0.0);
    for (int64_t b = 0; b < kBatch; ++b) {
      pick[((b * kT + kT - 1) * V) + 3] = 1.0;
      pick[((b * kT + kT - 1) * V) + 7] = -1.0;
    }
    return ag::add(ag::sum(ag::mul(logits, ag::Tensor<double>::from(logits.shape(), pick))),
                   ag::cross_entropy(logits, targets, -1));
  };
  // Each variant's probes are read from two backwards, with and without parameter gradients, each on a
  // fresh model of the same weights; both are checked against the same finite differences.
  for (const nn::ModelShape& variant : variants()) {
    nn::Hooks<double> probes_by_kind[2];
    std::optional<nn::CausalLM<double>> last;
    for (bool parameter_grads : {true, false}) {
      ag::Rng rng(6);
      nn::CausalLM<double>& model = last.emplace(variant, rng);
      nn::Hooks<double>& probes = probes_by_kind[parameter_grads ? 0 : 1];
      for (const std::string& p : model.hook_points()) probes.grad(p);
      model.zero_grad();
      {
        std::optional<nn::NoParameterGrads<double>> off;
        if (!parameter_grads) off.emplace(model);
        metric_of(model.forward(kA, kBatch, kT, {}, &probes)).backward();
      }
      // Parameter gradients: as a plain backward's when on, none at all when off.
      for (const auto& p : model.named_parameters()) BOOST_TEST(p.tensor->has_grad() == parameter_grads);
      if (parameter_grads) {
        std::vector<std::vector<double>> with_probes;
        for (const auto& p : model.named_parameters())
          with_probes.push_back(p.tensor->grad_tensor().to_vector());
        model.zero_grad();
        nn::Hooks<double> plain;
        metric_of(model.forward(kA, kBatch, kT, {}, &plain)).backward();
        size_t i = 0;
        for (const auto& p : model.named_parameters())
          BOOST_TEST((p.tensor->grad_tensor().to_vector() == with_probes[i++]), p.name);
      }
    }
    const nn::CausalLM<double>& model = *last;
    ag::NoGradScope no_grad;
    for (const std::string& p : model.hook_points()) {
      const ag::Tensor<double> gradients[2] = {probes_by_kind[0].gradient(p), probes_by_kind[1].gradient(p)};
      const int64_t n = gradients[0].numel();
      for (int kind = 0; kind < 2; ++kind) {
        const ag::Tensor<double>& g = gradients[kind];
        BOOST_TEST_REQUIRE(g.numel() == n, p);
        double largest = 0;
        for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(g.data()[i]));
        BOOST_TEST(largest > 1e-6, p << (kind == 0 ? " with" : " without")
                                     << " parameter gradients: no gradient reached the point");
      }
      // About 40 elements spread over the value (every element for small ones).
      for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 40)) {
        auto nudged = [&](double delta) {
          nn::Hooks<double> hooks;
          hooks.add(p, [i, delta](const ag::Tensor<double>& v) {
            ag::Tensor<double> out = v.detach();
            out.data()[i] += delta;
            return out;
          });
          return metric_of(model.forward(kA, kBatch, kT, {}, &hooks)).item();
        };
        const double eps = 1e-5, numeric = (nudged(eps) - nudged(-eps)) / (2 * eps);
        for (int kind = 0; kind < 2; ++kind) {
          const double g = gradients[kind].data()[i];
          BOOST_TEST(std::fabs(g - numeric) <= 1e-7 * std::max(1.0, std::fabs(numeric)),
                     p << " element " << i << (kind == 0 ? " with" : " without")
                       << " parameter gradients: backward " << g << ", finite differences " << numeric);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_gradient_needs_a_recorded_forward) {
  ag::Rng rng(6);
  const nn::CausalLM<double> model(shape(), rng);
  nn::Hooks<double> probes;
  probes.grad("blocks.1.attn.z");
  ag::NoGradScope no_grad;
  BOOST_CHECK_THROW(model.forward(kA, kBatch, kT, {}, &probes), std::logic_error);
  nn::Hooks<double> none;
  BOOST_CHECK_THROW(none.gradient("blocks.1.attn.z"), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(gradients_flow_through_a_position_patch_to_its_source_only) {
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
  try {
    logits_of(model, kA, &typo);
  } catch (const std::invalid_argument& e) {  // names the point and lists the model's points
    const std::string what = e.what();
    BOOST_TEST(what.find("blocks.0.attn.patern") != std::string::npos, what);
    BOOST_TEST(what.find("attn.pattern") != std::string::npos, what);
    BOOST_TEST(what.find("mlp.out") == std::string::npos, what);
    BOOST_TEST(what.find('\n') == std::string::npos, what);
  }
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
