// Circuit analysis (analysis/circuits.h) against an independent NumPy implementation (fixture
// induction_small.json, from tests/fixtures/make_fixtures.py and the committed checkpoint), plus hand-checked
// cases, errors and the JSON.
#include <Eigen/Eigenvalues>
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "analysis/circuits.h"
#include "common/fixture.h"
#include "train/run_folder.h"

namespace {

// Element k of a fixture tensor (a temporary tensor's data cannot be read directly).
double element(const testing::Fixture& f, const std::string& name, int64_t k) {
  const ag::Tensor<double> t = f.tensor<double>(name);
  return t.data()[k];
}

const std::string kRun = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small";

train::Batch dla_batch(const testing::Fixture& f) {
  train::Batch b;
  b.B = f.meta().at("dla_batch");
  b.T = f.meta().at("dla_seq_len");
  b.inputs = f.meta().at("dla_tokens").get<std::vector<int32_t>>();
  b.targets = f.meta().at("dla_targets").get<std::vector<int32_t>>();
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_numpy_to_1e_4) {
  const testing::Fixture f("induction_small.json");
  const train::LoadedRun run = train::load_run(kRun);
  const int L = f.meta().at("n_layers"), H = f.meta().at("n_heads"), T = f.meta().at("positions");
  const findings::CircuitsResult r = analysis::analyse_circuits(*run.model, dla_batch(f), T, true);

  double worst_comp = 0;
  const ag::Tensor<double> comp = f.tensor<double>("composition");  // [3, earlier, later]
  const int64_t n_from = comp.size(1), n_to = comp.size(2);
  BOOST_TEST_REQUIRE(r.composition.size() == static_cast<size_t>(H * H));  // two layers
  for (const findings::CompositionScore& c : r.composition) {
    const int64_t i = c.from_layer * H + c.from_head, j = (c.to_layer - 1) * H + c.to_head;
    const double* base = comp.data() + i * n_to + j;
    worst_comp = std::max({worst_comp, std::fabs(c.q - base[0]), std::fabs(c.k - base[n_from * n_to]),
                           std::fabs(c.v - base[2 * n_from * n_to])});
  }
  double worst_head = 0, worst_pos = 0;
  const ag::Tensor<double> copying = f.tensor<double>("copying"), dla = f.tensor<double>("dla_heads"),
                           prev = f.tensor<double>("prev_token_positional"),
                           maps = f.tensor<double>("positional");
  BOOST_TEST_REQUIRE(r.heads.size() == static_cast<size_t>(L * H));
  for (const findings::HeadCircuit& h : r.heads) {
    worst_head = std::max({worst_head, std::fabs(h.copying - copying.data()[h.layer * H + h.head]),
                           std::fabs(h.dla - dla.data()[h.layer * H + h.head])});
    BOOST_TEST(h.prev_token_positional.has_value() == (h.layer == 0));
    if (h.prev_token_positional)
      worst_pos = std::max(worst_pos, std::fabs(*h.prev_token_positional - prev.data()[h.head]));
  }
  for (const findings::PositionalMap& m : r.positional)
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        worst_pos = std::max(worst_pos, std::fabs(m.weights[i][j] - maps.data()[(m.head * T + i) * T + j]));
  BOOST_TEST_REQUIRE(r.components.size() == static_cast<size_t>(1 + L));  // embed and one MLP per layer
  double worst_comp_dla = std::fabs(r.components[0].dla - element(f, "dla_embed", 0));
  for (int l = 0; l < L; ++l)
    worst_comp_dla = std::max(worst_comp_dla, std::fabs(r.components[1 + l].dla - element(f, "dla_mlp", l)));
  BOOST_TEST_MESSAGE("circuits: max |ours - NumPy|: composition "
                     << worst_comp << ", copying/DLA heads " << worst_head << ", positional " << worst_pos
                     << ", DLA embed/MLP " << worst_comp_dla);
  BOOST_TEST(worst_comp < 1e-4);
  BOOST_TEST(worst_head < 1e-4);
  BOOST_TEST(worst_pos < 1e-4);
  BOOST_TEST(worst_comp_dla < 1e-4);
  // The baseline is a 100-pair mean of random scores; NumPy's 4000-pair mean is its expectation.
  const ag::Tensor<double> base = f.tensor<double>("baseline");
  BOOST_TEST(std::fabs(r.baseline->q - base.data()[0]) < 0.015);
  BOOST_TEST(std::fabs(r.baseline->k - base.data()[1]) < 0.015);
  BOOST_TEST(std::fabs(r.baseline->v - base.data()[2]) < 0.015);
}

BOOST_AUTO_TEST_CASE(hand_checked_scores) {
  // ||I I||_F / (||I||_F ||I||_F) = sqrt(D) / D.
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(16, 16);
  BOOST_TEST(std::fabs(analysis::composition_score(I * I, I, I) - 0.25) < 1e-12);
  // Orthogonal subspaces do not compose at all.
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(4, 4), Y = Eigen::MatrixXd::Zero(4, 4);
  X(0, 0) = 1, Y(1, 1) = 1;
  BOOST_TEST(analysis::composition_score(X * Y, X, Y) == 0.0);
  // The baseline is seeded: the same numbers every time; a different seed gives different draws.
  const findings::CompositionBaseline a = analysis::composition_baseline(16, 8),
                                      b = analysis::composition_baseline(16, 8);
  BOOST_TEST(a.k == b.k);
  BOOST_TEST(analysis::composition_baseline(16, 8, 100, 7).k != a.k);
  // Positional maps are causal softmax rows.
  const train::LoadedRun run = train::load_run(kRun);
  const auto w = analysis::positional_qk(*run.model, 0, 12);
  for (int i = 0; i < 12; ++i) {
    double sum = 0;
    for (int j = 0; j < 12; ++j) sum += w[i][j];
    BOOST_TEST(std::fabs(sum - 1) < 1e-12);
    for (int j = i + 1; j < 12; ++j) BOOST_TEST(w[i][j] == 0.0);
  }
  BOOST_TEST(std::isnan(analysis::previous_token_mass({{1.0}})));
}

// The scores are read from dk x dk factors (no V x V or D x D matrix): they equal the direct forms, the
// eigenvalues of W_E OV W_U (V x V) and the norms of the D x D products, for a vocabulary smaller than dk
// and one far larger than D, with grouped-query heads.
BOOST_AUTO_TEST_CASE(factored_scores_equal_the_direct_forms) {
  for (const int64_t vocab : {5, 300}) {
    nn::ModelShape shape;
    shape.vocab = vocab, shape.max_len = 8, shape.d_model = 16, shape.n_heads = 2, shape.n_layers = 2;
    shape.d_ff = 32, shape.n_kv_heads = 1;
    ag::Rng rng(3);
    const nn::CausalLM<float> model(shape, rng);
    const auto matrix = [](const ag::Tensor<float>& t) {
      Eigen::MatrixXd m(t.size(0), t.size(1));
      for (Eigen::Index i = 0; i < m.rows(); ++i)
        for (Eigen::Index j = 0; j < m.cols(); ++j) m(i, j) = t.data()[i * m.cols() + j];
      return m;
    };
    const Eigen::MatrixXd we = matrix(model.tok_emb.weight);
    Eigen::VectorXd ln_f(shape.d_model);
    for (int64_t d = 0; d < shape.d_model; ++d) ln_f(d) = model.ln_f->weight.data()[d];
    const Eigen::MatrixXd wu = ln_f.asDiagonal() * matrix(model.lm_head.weight).transpose();
    double worst_copying = 0;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) {
        const Eigen::MatrixXd full = we * analysis::head_weights(model, l, h).OV() * wu;
        const Eigen::VectorXcd eig = Eigen::EigenSolver<Eigen::MatrixXd>(full, false).eigenvalues();
        double re = 0, abs = 0;
        for (Eigen::Index i = 0; i < eig.size(); ++i) re += eig(i).real(), abs += std::abs(eig(i));
        worst_copying = std::max(worst_copying, std::fabs(analysis::copying_score(model, l, h) - re / abs));
      }
    double worst_composition = 0;
    for (const findings::CompositionScore& c : analysis::composition_scores(model)) {
      const analysis::HeadWeights a = analysis::head_weights(model, c.from_layer, c.from_head),
                                  b = analysis::head_weights(model, c.to_layer, c.to_head);
      const Eigen::MatrixXd ov = a.OV(), qk = b.QK();
      worst_composition =
          std::max({worst_composition, std::fabs(c.q - analysis::composition_score(ov * qk, ov, qk)),
                    std::fabs(c.k - analysis::composition_score(ov * qk.transpose(), ov, qk)),
                    std::fabs(c.v - analysis::composition_score(ov * b.OV(), ov, b.OV()))});
    }
    BOOST_TEST_MESSAGE("vocab " << vocab << ": max |factored - direct| copying " << worst_copying
                                << ", composition " << worst_composition);
    BOOST_TEST(worst_copying < 1e-9);
    BOOST_TEST(worst_composition < 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(errors_and_json) {
  const testing::Fixture f("induction_small.json");
  const train::LoadedRun run = train::load_run(kRun);
  train::Batch unscored = dla_batch(f);
  std::fill(unscored.targets.begin(), unscored.targets.end(), -1);
  BOOST_CHECK_THROW(analysis::direct_logit_attribution(*run.model, unscored), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::positional_qk(*run.model, 0, 99), std::invalid_argument);
  BOOST_CHECK_THROW(analysis::copying_score(*run.model, 2, 0), std::invalid_argument);

  findings::CircuitsResult r = analysis::analyse_circuits(*run.model, dla_batch(f), 12, false);
  BOOST_TEST(r.composition.empty());
  BOOST_TEST(!r.baseline.has_value());
  r.baseline = findings::CompositionBaseline{0.1, 0.2, 0.3};
  r.composition = {{0, 1, 1, 0, 0.4, 0.5, 0.6}};
  const nlohmann::json j = findings::circuits_to_json(r, false);
  BOOST_TEST(j["composition"][0]["from"] == nlohmann::json::array({0, 1}));
  BOOST_TEST(j["heads"][0].contains("prev_token_positional"));
  BOOST_TEST(j["heads"][2]["prev_token_positional"].is_null());
  const findings::CircuitsResult back =
      findings::circuits_from_json(findings::circuits_to_json(r, true), "c.json");
  BOOST_TEST(back.composition[0].k == 0.5);
  BOOST_TEST(back.baseline->v == 0.3);
  BOOST_TEST(back.positional.size() == r.positional.size());
  BOOST_TEST(back.heads[1].copying == r.heads[1].copying);
  BOOST_TEST(!findings::svg_composition(r, "t").empty());
  BOOST_TEST(!findings::svg_positional(r, "t").empty());
}

BOOST_AUTO_TEST_CASE(rotary_positional_qk_depends_on_the_offset_alone) {
  // A random rotary model: X is the mean token at every position and q, k turn by their positions, so
  // score(i, j) = s(i - j) and w[i][j] / w[i][j'] = w[i + 1][j + 1] / w[i + 1][j' + 1].
  nn::ModelShape s;
  s.vocab = 9;
  s.max_len = 8;
  s.d_model = 16;
  s.n_heads = 2;
  s.n_layers = 1;
  s.attention_only = true;
  s.norm = nn::NormKind::rms;
  s.positions = nn::PositionKind::rotary;
  s.rotary_base = 10;
  ag::Rng rng(3);
  const nn::CausalLM<float> model(s, rng);
  const auto w = analysis::positional_qk(model, 1, 8);
  double spread = 0;  // how far from uniform the rows are: the rotation must matter
  for (int i = 1; i + 1 < 8; ++i)
    for (int j = 1; j <= i; ++j) {
      BOOST_TEST(std::abs(std::log(w[i][j] / w[i][0]) - std::log(w[i + 1][j + 1] / w[i + 1][1])) < 1e-9);
      spread = std::max(spread, std::abs(std::log(w[i][j] / w[i][0])));
    }
  BOOST_TEST(spread > 1e-3);
  s.positions = nn::PositionKind::none;
  ag::Rng rng2(3);
  const nn::CausalLM<float> nope(s, rng2);
  BOOST_CHECK_THROW(analysis::positional_qk(nope, 0, 8), std::invalid_argument);
}
