// Activation patching (analysis/patching.h) against an independent PyTorch implementation (fixture
// induction_small.json, made by tests/fixtures/make_fixtures.py from the committed checkpoint), plus its
// invariants, its errors and its JSON.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <set>

#include "analysis/patching.h"
#include "common/fixture.h"
#include "train/run_folder.h"

namespace {

// Element k of a fixture tensor (a temporary tensor's data cannot be read directly).
double element(const testing::Fixture& f, const std::string& name, int64_t k) {
  const ag::Tensor<double> t = f.tensor<double>(name);
  return t.data()[k];
}

const std::string kRun = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small";

std::vector<int32_t> ids(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_pytorch_to_1e_4) {
  const testing::Fixture f("induction_small.json");
  const train::LoadedRun run = train::load_run(kRun);
  const std::vector<int32_t> clean = ids(f.meta().at("clean")), corrupt = ids(f.meta().at("corrupt"));
  const auto [answer, wrong] = analysis::default_answer_wrong(*run.model, clean, corrupt);
  BOOST_TEST(answer == f.meta().at("answer").get<int>());
  BOOST_TEST(wrong == f.meta().at("wrong").get<int>());
  const findings::PatchingResult r = analysis::activation_patching(*run.model, clean, corrupt, answer, wrong);
  BOOST_TEST(std::fabs(r.clean - element(f, "clean_diff", 0)) < 1e-4);
  BOOST_TEST(std::fabs(r.corrupt - element(f, "corrupt_diff", 0)) < 1e-4);

  const int L = f.meta().at("n_layers"), H = f.meta().at("n_heads"), T = static_cast<int>(clean.size());
  const ag::Tensor<double> resid = f.tensor<double>("resid_pre"), head_z = f.tensor<double>("head_z"),
                           head_all = f.tensor<double>("head_all");
  BOOST_TEST_REQUIRE(r.resid_pre.size() == static_cast<size_t>((L + 1) * T));
  BOOST_TEST_REQUIRE(r.head_z.size() == static_cast<size_t>(L * H * T));
  BOOST_TEST_REQUIRE(r.head_all.size() == static_cast<size_t>(L * H));
  double worst = 0;
  for (const findings::ResidPatch& p : r.resid_pre)
    worst = std::max(worst, std::fabs(p.recovered - resid.data()[p.layer * T + p.position]));
  for (const findings::HeadPositionPatch& p : r.head_z)
    worst = std::max(worst, std::fabs(p.recovered - head_z.data()[(p.layer * H + p.head) * T + p.position]));
  for (const findings::HeadPatch& p : r.head_all)
    worst = std::max(worst, std::fabs(p.recovered - head_all.data()[p.layer * H + p.head]));
  BOOST_TEST_MESSAGE("patching: max |recovered - PyTorch| = " << worst);
  BOOST_TEST(worst < 1e-4);
  // The fixture is not degenerate: something is recovered and something is not.
  double top = 0;
  for (int k = 0; k < resid.numel(); ++k) top = std::max(top, resid.data()[k]);
  BOOST_TEST(top > 0.5);
}

BOOST_AUTO_TEST_CASE(every_pair_once_and_the_last_resid_post_is_all_or_nothing) {
  const train::LoadedRun run = train::load_run(kRun);
  const std::vector<int32_t> clean{0, 2, 5, 4, 8, 3, 10, 6, 4}, corrupt{0, 2, 5, 4, 9, 3, 10, 6, 4};
  const findings::PatchingResult r = analysis::activation_patching(*run.model, clean, corrupt, 8, 9);
  const int L = static_cast<int>(run.model->blocks.size()), T = static_cast<int>(clean.size());
  std::set<std::pair<int, int>> seen;
  for (const findings::ResidPatch& p : r.resid_pre) {
    BOOST_TEST(seen.insert({p.layer, p.position}).second);
    BOOST_TEST((p.position >= 0 && p.position < T));
    // After the last layer nothing mixes positions: only the last position's stream reaches the metric.
    if (p.layer == L) BOOST_TEST(std::fabs(p.recovered - (p.position == T - 1 ? 1.0 : 0.0)) < 1e-5);
    // Positions where the inputs agree carry nothing at layer 0 (the residual is the same there).
    if (p.layer == 0 && clean[p.position] == corrupt[p.position]) BOOST_TEST(std::fabs(p.recovered) < 1e-6);
  }
  BOOST_TEST(seen.size() == static_cast<size_t>((L + 1) * T));
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_errors) {
  const train::LoadedRun run = train::load_run(kRun);
  const std::vector<int32_t> a{0, 2, 5, 4}, b{0, 2, 5}, c{0, 2, 6, 4};
  BOOST_CHECK_THROW(analysis::activation_patching(*run.model, a, b, 1, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::activation_patching(*run.model, a, c, 3, 3), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::activation_patching(*run.model, a, c, 1, 99), std::invalid_argument);
  // Identical inputs: clean and corrupt agree, nothing to recover; and the default metric is 0.
  BOOST_CHECK_THROW(analysis::activation_patching(*run.model, a, a, 1, 2), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::default_answer_wrong(*run.model, a, a), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(qkv_pattern_and_attribution_match_pytorch_to_1e_4) {
  // residual_small.json (tests/fixtures/make_residual_fixture.py): the same checkpoint and inputs, q/k/v and
  // pattern patched one forward per patch, and attribution patching from torch.autograd.
  const testing::Fixture f("residual_small.json");
  const train::LoadedRun run = train::load_run(kRun);
  const std::vector<int32_t> clean = ids(f.meta().at("clean")), corrupt = ids(f.meta().at("corrupt"));
  const int answer = f.meta().at("answer"), wrong = f.meta().at("wrong");
  const findings::PatchingResult r = analysis::activation_patching(*run.model, clean, corrupt, answer, wrong);
  double clean_diff = 0, corrupt_diff = 0;
  const findings::PatchEffects e =
      analysis::attribution_patching(*run.model, clean, corrupt, answer, wrong, &clean_diff, &corrupt_diff);
  BOOST_TEST(std::fabs(clean_diff - element(f, "clean_diff", 0)) < 1e-4);
  BOOST_TEST(std::fabs(corrupt_diff - element(f, "corrupt_diff", 0)) < 1e-4);
  // Each kind's list is in the fixture tensor's row-major order.
  auto worst_of = [&](const std::vector<double>& ours, const std::string& name) {
    const ag::Tensor<double> ref = f.tensor<double>(name);
    BOOST_TEST_REQUIRE(ours.size() == static_cast<size_t>(ref.numel()), name);
    double worst = 0;
    for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::fabs(ours[i] - ref.data()[i]));
    BOOST_TEST_MESSAGE(name << ": max |ours - PyTorch| = " << worst);
    return worst;
  };
  for (const std::string kind : {"head_q", "head_k", "head_v", "head_pattern"})
    BOOST_TEST(worst_of(findings::patch_values(r, kind), "patch_" + kind) < 1e-4, kind);
  for (const std::string& kind : findings::patch_kinds())
    BOOST_TEST(worst_of(findings::patch_values(e, kind), "attribution_" + kind) < 1e-4, kind);
  // Not degenerate: the estimates are not all zero (the largest, the last resid_post at the last position,
  // is 0.48 where the real patch recovers 1: ln_f's scale is not linear).
  double top = 0;
  for (double v : findings::patch_values(e, "resid_pre")) top = std::max(top, std::fabs(v));
  BOOST_TEST(top > 0.4);
}

BOOST_AUTO_TEST_CASE(json_has_the_schema_and_round_trips) {
  findings::PatchingResult r;
  r.answer = 3, r.wrong = 4, r.clean = 2.5, r.corrupt = -1.25;
  r.resid_pre = {{0, 0, 0.5}, {1, 0, -0.25}};
  r.head_z = {{0, 1, 0, 0.75}};
  r.head_all = {{0, 1, 1.0}};
  r.clean_tokens = {"BOS"}, r.corrupt_tokens = {"BOS"}, r.answer_token = "2", r.wrong_token = "3";
  const nlohmann::json j = findings::patching_to_json(r, false);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  BOOST_TEST((keys == std::set<std::string>{"answer", "wrong", "clean", "corrupt", "resid_pre", "head_z",
                                            "head_all"}));
  BOOST_TEST(j["head_z"][0].size() == 4u);
  const findings::PatchingResult back =
      findings::patching_from_json(findings::patching_to_json(r, true), "x.json");
  BOOST_TEST(back.resid_pre[1].recovered == -0.25);
  BOOST_TEST(back.head_z[0].head == 1);
  BOOST_TEST(back.answer_token == "2");
  nlohmann::json bad = j;
  bad["head_z"][0].erase("position");
  BOOST_CHECK_EXCEPTION(findings::patching_from_json(bad, "x.json"), std::runtime_error,
                        [](const std::runtime_error& e) {
                          return std::string(e.what()).find("x.json: /head_z/0/position") == 0;
                        });
  BOOST_TEST(!findings::svg_patching(r, "t").empty());
  BOOST_TEST(findings::patching_table(r).find("resid_post 0") != std::string::npos);

  // With the new kinds and the attribution: the same lists under "attribution", read back, and a correlation
  // per kind both sides have.
  r.head_q = {{0, 1, 0, 0.5}};
  r.head_pattern = {{0, 1, 0.25}};
  r.resid_pre.push_back({1, 1, 0.75});
  r.attribution = findings::PatchEffects{};
  r.attribution->resid_pre = {{0, 0, 0.4}, {1, 0, -0.2}, {1, 1, 0.9}};
  r.attribution->head_z = {{0, 1, 0, 0.7}};
  const nlohmann::json with = findings::patching_to_json(r, false);
  BOOST_TEST(with.contains("head_q"));
  BOOST_TEST(with.contains("head_pattern"));
  BOOST_TEST(!with.contains("head_k"));
  BOOST_TEST(with.at("attribution").at("resid_pre").size() == 3u);
  const findings::PatchingResult again = findings::patching_from_json(with, "x.json");
  BOOST_TEST_REQUIRE(again.attribution.has_value());
  BOOST_TEST(again.attribution->resid_pre[2].recovered == 0.9);
  BOOST_TEST(again.head_pattern[0].recovered == 0.25);
  const auto corr = findings::attribution_correlations(again);
  BOOST_TEST_REQUIRE(!corr.empty());
  BOOST_TEST(corr[0].first == "resid_pre");
  BOOST_TEST(corr[0].second == 0.975,
             boost::test_tools::tolerance(0.002));  // (0.5, -0.25, 0.75) vs (0.4, -0.2, 0.9)
  BOOST_TEST(findings::attribution_table(again).find("resid_pre") != std::string::npos);
}
