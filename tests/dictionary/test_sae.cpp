// Sparse autoencoders (dictionary/sae.h, dictionary/sae_eval.h, dictionary/sae_source.h): the forward, loss
// and gradients match an independent PyTorch computation (fixture sae_small.json, made by
// tests/fixtures/make_sae_fixture.py) to 1e-5 in float32 and 1e-10 in float64, and the loss passes a
// float64 gradcheck (the sparse ops it uses have their own in tests/autograd/test_sparse_ops.cpp); the
// evaluation on the trained induction_small model (MSE, explained variance, L0, dead, CE clean / with SAE /
// zero-ablated, CE recovered, KL) matches it to 1e-4; training is the same bits for the same seed and a
// resumed training is bit-exact (with an activation scale); the scale brings the mean norm to sqrt(d_in)
// and folds into the saved parameters exactly (ReLU and TopK), an old checkpoint without it resumes with
// scale 1 (the default config on every committed config's MLP: test_sae_defaults.cpp); TMS's dense regime
// stores 2 of 5 features; the Hungarian matching is optimal (against brute force); an SAE recovers a small
// synthetic dictionary; bad configs and files are one-line errors.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include "autograd/gradcheck.h"
#include "common/fixture.h"
#include "common/temp_dir.h"
#include "dictionary/sae.h"
#include "dictionary/sae_eval.h"
#include "dictionary/sae_source.h"
#include "dictionary/tms.h"
#include "train/run_folder.h"
#include "train/safetensors.h"
#include "train/trainer.h"

namespace {

template <typename T>
dictionary::SaeParams<T> fixture_params(const testing::Fixture& fx, bool requires_grad) {
  dictionary::SaeParams<T> p;
  p.W_enc = fx.tensor<T>("W_enc").set_requires_grad(requires_grad);
  p.b_enc = fx.tensor<T>("b_enc").set_requires_grad(requires_grad);
  p.W_dec = fx.tensor<T>("W_dec").set_requires_grad(requires_grad);
  p.b_dec = fx.tensor<T>("b_dec").set_requires_grad(requires_grad);
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool same_bits(const ag::Tensor<float>& a, const ag::Tensor<float>& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), sizeof(float) * a.numel()) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(forward_and_loss_match_pytorch_in_float32) {
  const testing::Fixture fx("sae_small.json");
  const auto p = fixture_params<float>(fx, false);
  const auto x = fx.tensor<float>("x");
  for (const std::string name : {"relu", "topk"}) {
    const auto act = name == "relu" ? dictionary::SaeActivation::relu : dictionary::SaeActivation::topk;
    const dictionary::SaeOutput<float> o =
        dictionary::sae_forward(p, x, act, fx.meta().at("l1").get<float>(), fx.meta().at("k").get<int>());
    for (const auto& [ours, ref] : std::vector<std::pair<ag::Tensor<float>, std::string>>{
             {o.f, "f"}, {o.x_hat, "x_hat"}, {o.mse, "mse"}, {o.sparsity, "sparsity"}, {o.loss, "loss"}}) {
      const testing::Difference d = testing::compare(ours, fx.tensor<double>(name + "." + ref));
      BOOST_TEST(d.within(1e-5, 1e-6), name << "." << ref << ": relative difference " << d.relative());
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_match_pytorch_and_finite_differences_in_float64) {
  const testing::Fixture fx("sae_small.json");
  const auto x = fx.tensor<double>("x");
  for (const std::string name : {"relu", "topk"}) {
    const auto act = name == "relu" ? dictionary::SaeActivation::relu : dictionary::SaeActivation::topk;
    const double l1 = fx.meta().at("l1").get<double>();
    const int k = fx.meta().at("k").get<int>();
    auto p = fixture_params<double>(fx, true);
    dictionary::sae_forward(p, x, act, l1, k).loss.backward();
    const std::vector<std::pair<std::string, ag::Tensor<double>*>> params = {
        {"W_enc", &p.W_enc}, {"b_enc", &p.b_enc}, {"W_dec", &p.W_dec}, {"b_dec", &p.b_dec}};
    for (const auto& [pname, t] : params) {
      const testing::Difference d =
          testing::compare(t->grad_tensor(), fx.tensor<double>(name + ".grad." + pname));
      BOOST_TEST(d.within(1e-10, 1e-12), name << " d" << pname << ": relative difference " << d.relative());
    }
    const ag::GradcheckResult r = ag::gradcheck(
        [&](const std::vector<ag::Tensor<double>>& in) {
          dictionary::SaeParams<double> q{in[0], in[1], in[2], in[3], {}, false, {}};
          return dictionary::sae_forward(q, x, act, l1, k).loss;
        },
        {p.W_enc.detach().set_requires_grad(true), p.b_enc.detach().set_requires_grad(true),
         p.W_dec.detach().set_requires_grad(true), p.b_dec.detach().set_requires_grad(true)});
    BOOST_TEST(r.worst() < 1e-6, name << ": " << r.report({"W_enc", "b_enc", "W_dec", "b_dec"}));
  }
}

BOOST_AUTO_TEST_CASE(evaluation_matches_pytorch_on_the_induction_model) {
  const testing::Fixture fx("sae_small.json");
  const train::LoadedRun run =
      train::load_run(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small");
  train::Batch batch;
  batch.B = fx.meta().at("B").get<int>();
  batch.T = fx.meta().at("T").get<int>();
  batch.inputs = fx.meta().at("tokens").get<std::vector<int32_t>>();
  batch.targets = fx.meta().at("targets").get<std::vector<int32_t>>();
  dictionary::SaeConfig config;
  config.top_examples = 2;
  std::vector<findings::SaeFeature> features;
  const dictionary::SaeEval e =
      dictionary::evaluate_sae(*run.model, *run.task, fixture_params<float>(fx, false), config,
                               fx.meta().at("point"), batch, &features);
  auto ref = [&](const char* name) { return fx.tensor<double>(std::string("eval.") + name).item(); };
  BOOST_TEST(e.tokens == batch.B * (batch.T - 1));
  BOOST_TEST(e.mse == ref("mse"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.explained_variance == ref("explained_variance"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.l0 == ref("l0"), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(e.dead == static_cast<int64_t>(ref("dead")));
  BOOST_TEST(e.ce_clean == ref("ce_clean"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.ce_with_sae == ref("ce_with_sae"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.ce_zero_ablation == ref("ce_zero_ablation"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.ce_loss_recovered == ref("ce_loss_recovered"), boost::test_tools::tolerance(1e-4));
  BOOST_TEST(e.kl == ref("kl"), boost::test_tools::tolerance(1e-3));
  // Features: every example's peak is its recorded max (to rounding), at most top_examples per feature,
  // strongest first.
  BOOST_TEST_REQUIRE(features.size() == 40u);
  int with_examples = 0;
  for (const findings::SaeFeature& f : features) {
    BOOST_TEST(f.examples.size() <= 2u);
    with_examples += !f.examples.empty();
    for (size_t i = 0; i < f.examples.size(); ++i) {
      const findings::SaeExample& ex = f.examples[i];
      // The sequence's activations are recomputed on its own rows: the same up to float rounding.
      BOOST_TEST(ex.acts.at(ex.position) == ex.max, boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(*std::max_element(ex.acts.begin(), ex.acts.end()) == ex.max,
                 boost::test_tools::tolerance(1e-5f));
      if (i > 0) BOOST_TEST(ex.max <= f.examples[i - 1].max);
    }
    BOOST_TEST(f.promoted.size() == 5u);
    BOOST_TEST(f.promoted.front().second >= f.suppressed.front().second);
  }
  BOOST_TEST(with_examples > 0);
}

BOOST_AUTO_TEST_CASE(training_is_deterministic_and_resumes_bit_exactly) {
  const dictionary::SyntheticFeatures source(24, 8, 0.1, 5);
  dictionary::SaeConfig c;
  c.d_sae = 32;
  c.steps = 24;
  c.batch_size = 64;
  c.resample_every = 8;
  c.warmup = 4;
  auto batch = [&](int64_t step) { return source.batch(step, c.batch_size); };
  // With an activation scale (normalised activations), as `attograd sae` trains by default.
  const float scale = 0.37f;
  dictionary::SaeTrainer a(c, 8, {}, scale), b(c, 8, {}, scale);
  for (int i = 0; i < 24; ++i) {
    a.step(batch(i));
    b.step(batch(i));
  }
  BOOST_TEST(same_bits(a.params().W_enc, b.params().W_enc));
  BOOST_TEST(same_bits(a.params().W_dec, b.params().W_dec));
  // Resume: 10 steps, checkpoint, a fresh trainer continues from it.
  testing::TempDir tmp;
  const std::string path = (tmp.dir / "ck.safetensors").string();
  dictionary::SaeTrainer first(c, 8, {}, scale);
  for (int i = 0; i < 10; ++i) first.step(batch(i));
  first.save_checkpoint(path, {{"config", "{}"}});
  dictionary::SaeTrainer resumed(c, 8, {});  // the scale comes from the checkpoint
  resumed.load_checkpoint(path);
  BOOST_TEST(resumed.steps_done() == 10);
  BOOST_TEST(resumed.activation_scale() == scale);
  for (int i = 10; i < 24; ++i) resumed.step(batch(i));
  for (const auto& [x, y] : std::vector<std::pair<const ag::Tensor<float>*, const ag::Tensor<float>*>>{
           {&a.params().W_enc, &resumed.params().W_enc},
           {&a.params().b_enc, &resumed.params().b_enc},
           {&a.params().W_dec, &resumed.params().W_dec},
           {&a.params().b_dec, &resumed.params().b_dec}})
    BOOST_TEST(same_bits(*x, *y));
  // Decoder rows stay unit norm.
  const auto& W = a.params().W_dec;
  for (int64_t r = 0; r < W.size(0); ++r) {
    double n = 0;
    for (int64_t k = 0; k < W.size(1); ++k) n += double(W.data()[r * 8 + k]) * W.data()[r * 8 + k];
    BOOST_TEST(std::sqrt(n) == 1.0, boost::test_tools::tolerance(1e-5));
  }
}

// Normalisation: the scale brings the mean row norm to sqrt(d_in); folded into the parameters, the SAE on
// raw activations gives the trained SAE's features and reconstruction divided by the scale (ReLU and
// TopK), with unit decoder rows still. A checkpoint written before normalisation (no activation_scale)
// resumes with scale 1.
BOOST_AUTO_TEST_CASE(activation_scale_is_folded_into_the_saved_sae) {
  const dictionary::SyntheticFeatures source(24, 8, 0.1, 5);
  const ag::Tensor<float> x = source.batch(0, 512);
  const float scale = dictionary::activation_scale(x.to_vector(), 8);
  double mean_norm = 0;
  for (int64_t r = 0; r < 512; ++r) {
    double sq = 0;
    for (int64_t k = 0; k < 8; ++k) {
      const double v = double(scale) * x.data()[r * 8 + k];
      sq += v * v;
    }
    mean_norm += std::sqrt(sq) / 512;
  }
  BOOST_TEST(mean_norm == std::sqrt(8.0), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(dictionary::activation_scale(std::vector<float>(16, 0.f), 8) == 1.f);
  BOOST_TEST(scale > 1.5f);  // the source's rows are shorter than sqrt(8): the scale is not a no-op here
  for (const auto act : {dictionary::SaeActivation::relu, dictionary::SaeActivation::topk}) {
    dictionary::SaeConfig c;
    c.d_sae = 32;
    c.activation = act;
    c.k = 3;
    c.warmup = 2;
    c.batch_size = 64;
    dictionary::SaeTrainer t(c, 8, {}, scale);
    for (int i = 0; i < 30; ++i) t.step(source.batch(i + 1, c.batch_size));
    ag::NoGradScope no_grad;
    ag::Tensor<float> scaled = x.detach();
    for (int64_t i = 0; i < scaled.numel(); ++i) scaled.data()[i] *= scale;
    const dictionary::SaeOutput<float> trained = dictionary::sae_forward(t.params(), scaled, act, 0.f, c.k);
    const dictionary::SaeParams<float> raw = t.raw_params();
    const dictionary::SaeOutput<float> folded = dictionary::sae_forward(raw, x, act, 0.f, c.k);
    BOOST_TEST(same_bits(raw.W_dec, t.params().W_dec));
    BOOST_TEST(same_bits(raw.W_enc, t.params().W_enc));
    double worst_f = 0, worst_x = 0, active = 0;
    for (int64_t i = 0; i < folded.f.numel(); ++i) {
      worst_f = std::max(worst_f, std::abs(double(folded.f.data()[i]) - trained.f.data()[i] / scale));
      active += folded.f.data()[i] > 0;
    }
    for (int64_t i = 0; i < folded.x_hat.numel(); ++i)
      worst_x = std::max(worst_x, std::abs(double(folded.x_hat.data()[i]) - trained.x_hat.data()[i] / scale));
    BOOST_TEST(active > 0);
    BOOST_TEST(worst_f < 1e-5, "features differ by " << worst_f);
    BOOST_TEST(worst_x < 1e-5, "reconstructions differ by " << worst_x);
  }
  // An old checkpoint: the same file without activation_scale resumes with scale 1.
  testing::TempDir tmp;
  const std::string path = (tmp.dir / "ck.safetensors").string();
  dictionary::SaeConfig c;
  c.d_sae = 16;
  dictionary::SaeTrainer t(c, 8, {}, scale);
  t.step(source.batch(0, 64));
  t.save_checkpoint(path, {{"config", "{}"}});
  train::SafetensorsFile file = train::read_safetensors(path);
  BOOST_TEST(file.metadata.erase("activation_scale") == 1u);
  train::write_safetensors(path, file.tensors, file.metadata);
  dictionary::SaeTrainer old(c, 8, {}, scale);
  old.load_checkpoint(path);
  BOOST_TEST(old.activation_scale() == 1.f);
  BOOST_TEST(same_bits(old.params().W_enc, t.params().W_enc));
}

// TMS's two regimes for n 5, m 2 with the default request (importance 0.9^i): dense inputs store the two
// most important features (norm ~1) and no other above 0.5, as in the paper; sparse ones (0.97) store all
// five in superposition.
BOOST_AUTO_TEST_CASE(tms_dense_regime_stores_two_of_five_features) {
  dictionary::TmsRequest request;
  const std::vector<double> dense = dictionary::tms(request).result.panels.at(0).norms;
  BOOST_TEST_REQUIRE(dense.size() == 5u);
  BOOST_TEST(std::count_if(dense.begin(), dense.end(), [](double v) { return v > 0.5; }) == 2);
  BOOST_TEST(dense[0] > 0.9);
  BOOST_TEST(dense[1] > 0.9);
  request.sparsity = 0.97;
  const std::vector<double> sparse = dictionary::tms(request).result.panels.at(0).norms;
  BOOST_TEST(std::count_if(sparse.begin(), sparse.end(), [](double v) { return v > 0.5; }) == 5);
}

BOOST_AUTO_TEST_CASE(hungarian_matching_is_optimal) {
  ag::Rng rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + trial % 4, m = n + trial % 3;
    std::vector<double> w(static_cast<size_t>(n * m));
    for (double& v : w) v = rng.uniform();
    const std::vector<int> col = dictionary::hungarian_max(w, n, m);
    double got = 0;
    std::vector<int> seen;
    for (int i = 0; i < n; ++i) {
      got += w[i * m + col[i]];
      BOOST_TEST((std::find(seen.begin(), seen.end(), col[i]) == seen.end()));
      seen.push_back(col[i]);
    }
    // Brute force over every injective assignment (m <= 6).
    std::vector<int> perm(m);
    std::iota(perm.begin(), perm.end(), 0);
    double best = -1;
    do {
      double s = 0;
      for (int i = 0; i < n; ++i) s += w[i * m + perm[i]];
      best = std::max(best, s);
    } while (std::next_permutation(perm.begin(), perm.end()));
    BOOST_TEST(got == best, boost::test_tools::tolerance(1e-12));
  }
  // Identical dictionaries: cosine 1; MCC of a signal with itself (columns shuffled): 1.
  const dictionary::SyntheticFeatures s(6, 4, 0.3, 2);
  BOOST_TEST(dictionary::mean_max_cos(s.directions(), s.directions(), 4) == 1.0,
             boost::test_tools::tolerance(1e-6));
  std::vector<float> truth;
  s.batch(0, 200, &truth);
  std::vector<float> shuffled(truth.size());
  const int order[6] = {3, 0, 5, 1, 4, 2};
  for (int r = 0; r < 200; ++r)
    for (int j = 0; j < 6; ++j) shuffled[r * 6 + order[j]] = 2 * truth[r * 6 + j];
  BOOST_TEST(dictionary::mcc(truth, 6, shuffled, 6, 200) == 1.0, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(recovers_a_small_synthetic_dictionary) {
  const dictionary::SyntheticFeatures source(16, 12, 0.06, 3);
  dictionary::SaeConfig c;
  c.d_sae = 32;
  c.steps = 800;
  c.batch_size = 256;
  c.lr = 3e-3;
  c.l1_coefficient = 0.3;
  c.resample_every = 200;
  dictionary::SaeTrainer t(c, 12, {});
  for (int64_t i = 0; i < c.steps; ++i) t.step(source.batch(i, c.batch_size));
  const double cos = dictionary::mean_max_cos(source.directions(), t.params().W_dec.to_vector(), 12);
  BOOST_TEST(cos > 0.95, "mean max cos " << cos);
}

BOOST_AUTO_TEST_CASE(bad_configs_and_files_are_one_line_errors) {
  auto cfg = [](const std::string& text) {
    return error_of([&] { dictionary::sae_config_from_json(nlohmann::json::parse(text), "s.json"); });
  };
  BOOST_TEST(cfg("{\"l1\": 1}") == "s.json: /l1: unknown key");
  BOOST_TEST(cfg("{\"k\": 0}") == "s.json: /k: must be >= 1 and <= 65536, got 0");
  BOOST_TEST(cfg("{\"activation\": \"gelu\"}") ==
             "s.json: /activation: expected \"relu\", \"topk\", \"batchtopk\" or \"jumprelu\", got \"gelu\"");
  BOOST_TEST(cfg("{\"lr\": \"fast\"}") == "s.json: /lr: expected a number, got string \"fast\"");
  BOOST_TEST(cfg("{\"batch_size\": 100, \"buffer_tokens\": 10}") ==
             "s.json: /buffer_tokens: expected at least batch_size (100), got 10");
  BOOST_TEST(cfg("[]") == "s.json: /: expected an object, got an array");
  BOOST_TEST(cfg("{\"expansion\": 257}") == "s.json: /expansion: must be >= 1 and <= 256, got 257");
  BOOST_TEST(cfg("{\"lr\": 0}") == "s.json: /lr: must be > 0 and <= 10, got 0");
  BOOST_TEST(cfg("{\"activation\": [[\"relu\"]]}") == "s.json: /activation: expected a string, got an array");
  BOOST_TEST(cfg("{\"steps\": 3000000000000000}") ==
             "s.json: /steps: must be >= 1 and <= 1099511627776, got 3000000000000000");
  BOOST_TEST(cfg("{}").empty());
  BOOST_TEST(
      (dictionary::sae_config_from_json(nlohmann::json{{"activation", "topk"}, {"k", 4}}, "x").activation ==
       dictionary::SaeActivation::topk));
  // The table's rows, as a docs table shows them.
  const std::vector<io::FieldInfo> rows = dictionary::sae_config_field_infos();
  BOOST_TEST_REQUIRE(rows.size() == dictionary::sae_config_to_json(dictionary::SaeConfig{}).size());
  BOOST_TEST(rows[2].path == "activation");
  BOOST_TEST(rows[2].default_value == "\"relu\"");
  BOOST_TEST(rows[2].valid == "`relu`, `topk`, `batchtopk` or `jumprelu`");
  BOOST_TEST(rows[1].valid == ">= 1 and <= 256");
  const dictionary::SaeConfig round =
      dictionary::sae_config_from_json(dictionary::sae_config_to_json(dictionary::SaeConfig{}), "x");
  BOOST_TEST(dictionary::sae_config_to_json(round) ==
             dictionary::sae_config_to_json(dictionary::SaeConfig{}));

  testing::TempDir tmp;
  const std::string path = (tmp.dir / "sae.safetensors").string();
  ag::Rng rng(1);
  const dictionary::SaeParams<float> p = dictionary::init_sae(4, 6, rng);
  dictionary::write_sae_file(path, p, {{"hook_name", "blocks.0.resid_post"}});
  const dictionary::SaeParams<float> q = dictionary::load_sae(path);
  BOOST_TEST(same_bits(p.W_enc, q.W_enc));
  BOOST_TEST(same_bits(p.W_dec, q.W_dec));
  train::write_safetensors(path,
                           {{"W_enc", {4, 6}, std::vector<float>(24)},
                            {"b_enc", {6}, std::vector<float>(6)},
                            {"W_dec", {6, 3}, std::vector<float>(18)},
                            {"b_dec", {4}, std::vector<float>(4)}},
                           {});
  const std::string e1 = error_of([&] { dictionary::load_sae(path); });
  BOOST_TEST(e1.find(path) == 0u, e1);
  BOOST_TEST(e1.find("W_dec") != std::string::npos, e1);
  BOOST_TEST(e1.find('\n') == std::string::npos);
  train::write_safetensors(path, {{"b_enc", {6}, std::vector<float>(6)}}, {});
  BOOST_TEST(error_of([&] { dictionary::load_sae(path); }) == path + ": missing tensor W_enc");
  std::vector<float> nan(24, 0.f);
  nan[5] = std::nanf("");
  train::write_safetensors(path,
                           {{"W_enc", {4, 6}, nan},
                            {"b_enc", {6}, std::vector<float>(6)},
                            {"W_dec", {6, 4}, std::vector<float>(24)},
                            {"b_dec", {4}, std::vector<float>(4)}},
                           {});
  BOOST_TEST(error_of([&] { dictionary::load_sae(path); }) == path + ": W_enc: a value is not finite");
}

// docs/sae.md's config table is the code's table (dictionary/sae.cpp) row for row.
BOOST_AUTO_TEST_CASE(docs_config_table_is_the_code_table) {
  std::ifstream doc(std::string(ATTOGRAD_SOURCE_DIR) + "/docs/sae.md");
  BOOST_TEST_REQUIRE(doc.good());
  std::string rows;
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("### ", 0) == 0) in_section = line == "### The config";
    if (!in_section) continue;
    if (line.rfind("| `", 0) == 0) {
      in_table = true;
      rows += line + "\n";
    } else if (in_table && line.rfind("|", 0) != 0) {
      break;
    }
  }
  std::string expected;
  for (const io::FieldInfo& field : dictionary::sae_config_field_infos()) {
    expected += "| `" + field.path + "` | " + field.type + " | `" + field.default_value + "` | " +
                field.valid + " | " + field.meaning + " |\n";
  }
  BOOST_TEST(rows == expected, "docs/sae.md's config table rows should be:\n" + expected);
}
