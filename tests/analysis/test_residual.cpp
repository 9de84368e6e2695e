// The logit lens and residual decomposition (analysis/residual.h): the components at each position sum to the
// model's metric (1e-10 in float64, 1e-5 in float32), the last accumulated value is the metric, the first is
// the embeddings' terms, the bias terms do not depend on the position, models with and without MLPs; the
// numbers match an independent PyTorch computation (fixture residual_small.json, made by
// tests/fixtures/make_residual_fixture.py from the committed induction_small checkpoint) to 1e-4; the JSON
// round-trips; TransformerLens's cache helpers give the lens's numbers; bad arguments are one-line errors.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <map>

#include "analysis/residual.h"
#include "common/fixture.h"
#include "train/run_folder.h"

namespace {

nn::ModelShape shape(bool attention_only, nn::NormKind norm = nn::NormKind::layer) {
  nn::ModelShape s;
  s.norm = norm;
  s.vocab = 13;
  s.max_len = 9;
  s.d_model = 16;
  s.n_heads = 4;
  s.n_layers = 2;
  s.d_ff = 32;
  s.attention_only = attention_only;
  return s;
}

const std::vector<int32_t> kIds = {0, 4, 7, 2, 9, 4, 7, 12, 4};

// Gives the LayerNorms and biases values other than 1 and 0 (as trained models have), so that folding
// errors would show.
template <typename T>
void perturb(nn::CausalLM<T>& model, uint64_t seed) {
  ag::Rng rng(seed);
  for (const auto& p : model.named_parameters()) {
    const bool is_ln = p.name.find("ln") != std::string::npos;
    if (!is_ln && p.name.find("bias") == std::string::npos) continue;
    for (int64_t i = 0; i < p.tensor->numel(); ++i) p.tensor->data()[i] += T(0.3 * rng.normal());
  }
}

template <typename T>
void check_sums(bool attention_only, int wrong, double tolerance, nn::NormKind norm = nn::NormKind::layer) {
  ag::Rng rng(3);
  nn::CausalLM<T> model(shape(attention_only, norm), rng);
  perturb(model, 11);
  const findings::LensResult r = analysis::logit_lens(model, kIds, 7, wrong);
  const size_t T_ = kIds.size();
  BOOST_TEST_REQUIRE(r.actual.size() == T_);
  const std::vector<std::string> names = analysis::lens_component_names(model.shape);
  BOOST_TEST_REQUIRE(r.components.size() == names.size() * T_);
  BOOST_TEST_REQUIRE(r.accumulated.size() == (model.blocks.size() + 1) * T_);
  std::vector<double> total(T_, 0.0);
  std::map<std::string, std::vector<double>> by_name;
  for (const auto& c : r.components) {
    total[c.position] += c.value;
    by_name[c.name].push_back(c.value);
  }
  double largest = 0;
  for (size_t t = 0; t < T_; ++t) {
    BOOST_TEST(std::fabs(total[t] - r.actual[t]) <= tolerance,
               "position " << t << ": components sum to " << total[t] << ", metric " << r.actual[t]);
    largest = std::max(largest, std::fabs(r.actual[t]));
  }
  BOOST_TEST(largest > 0.1);  // not a trivially zero metric
  // Accumulated: the last (resid_post of the last block) is the metric; the first (resid_pre 0) is the
  // embeddings plus the two bias terms (RMSNorm has no ln_f.bias).
  const bool ln_bias = nn::norm_has_bias(norm);
  BOOST_TEST(by_name.count("ln_f.bias") == (ln_bias ? 1u : 0u));
  if (!ln_bias) by_name["ln_f.bias"].assign(T_, 0.0);
  const std::string first = nn::hook_name(nn::Point::resid_pre, 0),
                    last = nn::hook_name(nn::Point::resid_post, model.blocks.size() - 1);
  for (const auto& a : r.accumulated) {
    const size_t t = static_cast<size_t>(a.position);
    if (a.point == last) BOOST_TEST(std::fabs(a.value - r.actual[t]) <= tolerance, last << " at " << t);
    if (a.point == first) {
      const double expected = by_name["embed"][t] + by_name["pos_embed"][t] + by_name["ln_f.bias"][t] +
                              by_name["lm_head.bias"][t];
      BOOST_TEST(std::fabs(a.value - expected) <= tolerance, first << " at " << t);
    }
  }
  for (size_t t = 1; t < T_; ++t) {
    BOOST_TEST(by_name["ln_f.bias"][t] == by_name["ln_f.bias"][0]);
    BOOST_TEST(by_name["lm_head.bias"][t] == by_name["lm_head.bias"][0]);
  }
  BOOST_TEST(by_name.count("blocks.1.mlp") == (attention_only ? 0u : 1u));
  BOOST_TEST(by_name.count("blocks.1.attn.head.3") == 1u);
}

}  // namespace

// TransformerLens's cache helpers (accumulated_resid, decompose_resid, stack_head_results through
// apply_ln_to_stack and logit_attrs) give the lens's numbers in float64 (1e-10): each head's attribution is
// its component, each accumulated row (plus the bias terms) its accumulated value; the decomposition's rows
// and the head results (plus Wo's biases and the MLPs) sum to the final residual.
BOOST_AUTO_TEST_CASE(the_cache_helpers_give_the_lens_numbers_in_float64) {
  for (nn::NormKind norm : {nn::NormKind::layer, nn::NormKind::rms})
    for (bool attention_only : {false, true}) {
      ag::Rng rng(3);
      nn::CausalLM<double> model(shape(attention_only, norm), rng);
      perturb(model, 11);
      const findings::LensResult r = analysis::logit_lens(model, kIds, 7, 3);
      std::map<std::string, std::vector<double>> comp, acc;
      for (const auto& c : r.components) comp[c.name].push_back(c.value);
      for (const auto& a : r.accumulated) acc[a.point].push_back(a.value);
      nn::Hooks<double> hooks;
      for (const std::string& p : model.hook_points()) hooks.capture(p);
      const int64_t T_ = static_cast<int64_t>(kIds.size()), L = 2, H = 4, D = 16;
      {
        ag::NoGradScope no_grad;
        model.forward(kIds, 1, T_, {}, &hooks);
      }
      const analysis::CacheLookup<double> cache = [&](const std::string& p) { return hooks.captured(p); };
      std::vector<double> bias(T_, 0.0);
      for (const char* b : {"ln_f.bias", "lm_head.bias"})
        if (comp.count(b))
          for (int64_t t = 0; t < T_; ++t) bias[t] += comp[b][t];

      const analysis::ResidualStack heads = analysis::stack_head_results(model, cache, L);
      BOOST_TEST_REQUIRE((heads.stack.shape() == ag::Shape{L * H, 1, T_, D}));
      const ag::Tensor<double> head_attrs = analysis::logit_attrs(
          model, analysis::apply_ln_to_stack(model, cache, heads.stack, L, false), 7, 3);
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h) {
          BOOST_TEST(heads.labels[l * H + h] == "L" + std::to_string(l) + "H" + std::to_string(h));
          const std::vector<double>& want =
              comp["blocks." + std::to_string(l) + ".attn.head." + std::to_string(h)];
          for (int64_t t = 0; t < T_; ++t)
            BOOST_TEST(std::fabs(head_attrs.data()[(l * H + h) * T_ + t] - want[t]) <= 1e-10);
        }
      const analysis::ResidualStack accumulated = analysis::accumulated_resid(model, cache, L, false, false);
      const ag::Tensor<double> acc_attrs = analysis::logit_attrs(
          model, analysis::apply_ln_to_stack(model, cache, accumulated.stack, L, false), 7, 3);
      const std::vector<std::string> points = {"blocks.0.resid_pre", "blocks.1.resid_pre",
                                               "blocks.1.resid_post"};
      BOOST_TEST((accumulated.labels == std::vector<std::string>{"0_pre", "1_pre", "final_post"}));
      for (size_t i = 0; i < points.size(); ++i)
        for (int64_t t = 0; t < T_; ++t)
          BOOST_TEST(std::fabs(acc_attrs.data()[i * T_ + t] + bias[t] - acc[points[i]][t]) <= 1e-10);

      // The pieces sum to the final residual.
      const analysis::ResidualStack parts = analysis::decompose_resid(model, cache, L, false, "all", true);
      BOOST_TEST(parts.labels.size() == (attention_only ? 4u : 6u));
      const ag::Tensor<double>& final = hooks.captured("blocks.1.resid_post");
      std::vector<double> by_parts(T_ * D, 0.0), by_heads(T_ * D, 0.0);
      for (int64_t i = 0; i < parts.stack.numel(); ++i) by_parts[i % (T_ * D)] += parts.stack.data()[i];
      for (int64_t i = 0; i < heads.stack.numel(); ++i) by_heads[i % (T_ * D)] += heads.stack.data()[i];
      for (int64_t i = 0; i < T_ * D; ++i) {
        by_heads[i] += hooks.captured("embed").data()[i] + hooks.captured("pos_embed").data()[i];
        for (int64_t l = 0; l < L; ++l) {
          by_heads[i] += model.blocks[l]->attn.wo.bias.data()[i % D];
          if (!attention_only)
            by_heads[i] += hooks.captured("blocks." + std::to_string(l) + ".mlp.out").data()[i];
        }
        BOOST_TEST(std::fabs(by_parts[i] - final.data()[i]) <= 1e-10);
        BOOST_TEST(std::fabs(by_heads[i] - final.data()[i]) <= 1e-10);
      }
      BOOST_CHECK_THROW(analysis::accumulated_resid(model, cache, L + 1, false, false),
                        std::invalid_argument);
      BOOST_CHECK_THROW(analysis::decompose_resid(model, cache, L, false, "heads", true),
                        std::invalid_argument);
    }
}

BOOST_AUTO_TEST_CASE(components_sum_to_the_metric_in_float64_within_1e_10) {
  for (bool attention_only : {false, true})
    for (int wrong : {-1, 3}) check_sums<double>(attention_only, wrong, 1e-10);
  // RMSNorm: ln_f's direction is scaled by its root mean square and weight, not centred, and has no bias.
  for (int wrong : {-1, 3}) check_sums<double>(false, wrong, 1e-10, nn::NormKind::rms);
}

BOOST_AUTO_TEST_CASE(components_sum_to_the_metric_in_float32_within_1e_5) {
  for (bool attention_only : {false, true})
    for (int wrong : {-1, 3}) check_sums<float>(attention_only, wrong, 1e-5);
  for (int wrong : {-1, 3}) check_sums<float>(false, wrong, 1e-5, nn::NormKind::rms);
}

BOOST_AUTO_TEST_CASE(the_actual_metric_is_the_logit_difference_of_the_forward) {
  ag::Rng rng(5);
  nn::CausalLM<double> model(shape(false), rng);
  perturb(model, 2);
  const findings::LensResult diff = analysis::logit_lens(model, kIds, 7, 3);
  const findings::LensResult mean = analysis::logit_lens(model, kIds, 7, -1);
  ag::NoGradScope no_grad;
  const ag::Tensor<double> logits = model.forward(kIds, 1, static_cast<int64_t>(kIds.size()));
  for (size_t t = 0; t < kIds.size(); ++t) {
    const double* row = logits.data() + t * 13;
    double avg = 0;
    for (int v = 0; v < 13; ++v) avg += row[v] / 13;
    BOOST_TEST(diff.actual[t] == row[7] - row[3], boost::test_tools::tolerance(1e-12));
    BOOST_TEST(mean.actual[t] == row[7] - avg, boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(matches_pytorch_to_1e_4) {
  const testing::Fixture f("residual_small.json");
  const train::LoadedRun run =
      train::load_run(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small");
  const std::vector<int32_t> clean = f.meta().at("clean").get<std::vector<int32_t>>();
  const std::vector<std::string> names = f.meta().at("component_names").get<std::vector<std::string>>();
  BOOST_TEST(names == analysis::lens_component_names(run.model->shape),
             "the fixture names the same components");
  const int T = static_cast<int>(clean.size());
  for (const std::string& variant : {std::string("lens_"), std::string("lens_mean_")}) {
    const int wrong = variant == "lens_" ? f.meta().at("wrong").get<int>() : -1;
    const findings::LensResult r =
        analysis::logit_lens(*run.model, clean, f.meta().at("answer").get<int>(), wrong);
    const ag::Tensor<double> acc = f.tensor<double>(variant + "accumulated"),
                             comp = f.tensor<double>(variant + "components"),
                             actual = f.tensor<double>(variant + "actual");
    BOOST_TEST_REQUIRE(r.accumulated.size() == static_cast<size_t>(acc.numel()));
    BOOST_TEST_REQUIRE(r.components.size() == static_cast<size_t>(comp.numel()));
    double worst = 0, largest = 0;
    for (size_t i = 0; i < r.accumulated.size(); ++i)  // by point, then position: the fixture's layout
      worst = std::max(worst, std::fabs(r.accumulated[i].value - acc.data()[i]));
    for (size_t i = 0; i < r.components.size(); ++i) {
      worst = std::max(worst, std::fabs(r.components[i].value - comp.data()[i]));
      largest = std::max(largest, std::fabs(comp.data()[i]));
    }
    for (int t = 0; t < T; ++t) worst = std::max(worst, std::fabs(r.actual[t] - actual.data()[t]));
    BOOST_TEST_MESSAGE(variant << ": max |ours - PyTorch| = " << worst);
    BOOST_TEST(worst < 1e-4, variant);
    BOOST_TEST(largest > 1.0, variant << ": the fixture is not degenerate");
  }
}

BOOST_AUTO_TEST_CASE(the_json_round_trips_and_is_checked) {
  ag::Rng rng(5);
  nn::CausalLM<float> model(shape(true), rng);
  findings::LensResult r = analysis::logit_lens(model, kIds, 7, -1);
  for (int id : kIds) r.positions.push_back(std::to_string(id));
  const nlohmann::json j = findings::lens_to_json(r, false);
  BOOST_TEST(j.at("wrong").is_null());
  BOOST_TEST(j.at("components").size() == r.components.size());
  BOOST_TEST(j.at("components")[0].at("name") == "embed");
  const findings::LensResult back = findings::lens_from_json(j, "x.json");
  BOOST_TEST(back.wrong == -1);
  BOOST_TEST(back.components.size() == r.components.size());
  BOOST_TEST(back.actual == r.actual);
  nlohmann::json bad = j;
  bad["components"][2].erase("value");
  try {
    findings::lens_from_json(bad, "x.json");
    BOOST_FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("/components/2/value") != std::string::npos, e.what());
  }
  // The table and the SVG name every component.
  const std::string table = findings::lens_table(r), svg = findings::svg_lens(r, "t");
  for (const std::string& name : analysis::lens_component_names(model.shape)) {
    BOOST_TEST(table.find(name) != std::string::npos, name);
    BOOST_TEST(svg.find(name) != std::string::npos, name);
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_one_line_errors) {
  ag::Rng rng(5);
  nn::CausalLM<float> model(shape(true), rng);
  BOOST_CHECK_THROW(analysis::logit_lens(model, {}, 1, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::logit_lens(model, std::vector<int32_t>(10, 1), 1, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::logit_lens(model, {0, 13}, 1, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::logit_lens(model, {0, 1}, 13, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::logit_lens(model, {0, 1}, 2, 2), std::invalid_argument);
}
