// The Fourier analysis of a modular-addition model (analysis/fourier.h) against an independent NumPy
// implementation (fixture fourier_small.json, from tests/fixtures/make_fourier_fixture.py and the committed
// run tests/fixtures/grokking_small/), plus the Gini coefficient on hand-checked values, the split it reads
// and the tasks it refuses.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "analysis/fourier.h"
#include "common/fixture.h"
#include "train/run_folder.h"
#include "train/tasks.h"

namespace {

const std::string kRun = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/grokking_small";

double scalar(const testing::Fixture& f, const std::string& name) {
  const ag::Tensor<double> t = f.tensor<double>(name);
  return t.data()[0];
}

double worst(const std::vector<double>& ours, const ag::Tensor<double>& ref) {
  BOOST_TEST_REQUIRE(ours.size() == static_cast<size_t>(ref.numel()));
  double w = 0;
  for (size_t i = 0; i < ours.size(); ++i) w = std::max(w, std::fabs(ours[i] - ref.data()[i]));
  return w;
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_numpy_to_1e_4) {
  const testing::Fixture f("fourier_small.json");
  const train::LoadedRun run = train::load_run(kRun);
  const findings::FourierReport r =
      analysis::fourier_analysis(*run.model, analysis::modular_addition(*run.task));
  BOOST_TEST(r.p == f.meta().at("p").get<int>());
  BOOST_TEST(r.measures.key_frequencies == f.meta().at("key_frequencies").get<std::vector<int>>());
  BOOST_TEST(worst(r.embed_norms, f.tensor<double>("embed_norms")) < 1e-4);
  BOOST_TEST(worst(r.unembed_norms, f.tensor<double>("unembed_norms")) < 1e-4);
  BOOST_TEST(worst(r.neuron_logit_norms, f.tensor<double>("neuron_logit_norms")) < 1e-4);
  std::vector<double> explained, frequency;
  for (const findings::FourierNeuron& n : r.neurons) {
    explained.push_back(n.explained);
    frequency.push_back(n.frequency);
  }
  BOOST_TEST(worst(explained, f.tensor<double>("neuron_explained")) < 1e-4);
  BOOST_TEST(worst(frequency, f.tensor<double>("neuron_frequency")) == 0);
  const findings::FourierMeasures& m = r.measures;
  const std::pair<const char*, double> scalars[] = {{"train_loss", m.train_loss},
                                                    {"test_loss", m.test_loss},
                                                    {"train_acc", m.train_acc},
                                                    {"test_acc", m.test_acc},
                                                    {"restricted_loss", m.restricted_loss},
                                                    {"excluded_loss", m.excluded_loss},
                                                    {"gini_embed", m.gini_embed},
                                                    {"gini_neuron_logit", m.gini_neuron_logit}};
  for (const auto& [name, value] : scalars) BOOST_TEST(std::fabs(value - scalar(f, name)) < 1e-4, name);
  const double w2 = scalar(f, "weight_norm_sq");
  BOOST_TEST(std::fabs(m.weight_norm_sq - w2) < 1e-4 * std::max(1.0, w2));
}

BOOST_AUTO_TEST_CASE(gini_of_hand_checked_values) {
  BOOST_TEST(analysis::gini({1, 1, 1, 1}) == 0.0, boost::test_tools::tolerance(1e-12));
  // All the mass on one of N: (N - 1) / N.
  BOOST_TEST(analysis::gini({0, 0, 0, 5}) == 0.75, boost::test_tools::tolerance(1e-12));
  // {1, 3}: 1 - 2 (1/4 * 1.5/2 + 3/4 * 0.5/2) = 0.25; the order of the input does not matter.
  BOOST_TEST(analysis::gini({3, 1}) == 0.25, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(analysis::gini({0, 0}) == 0.0);
}

BOOST_AUTO_TEST_CASE(the_pairs_and_their_split_are_the_tasks) {
  train::TaskConfig config{"modadd_bare", 23, 2};
  config.train_fraction = 0.3;
  const auto task = train::make_task(config, 5);
  const analysis::ModularAddition d = analysis::modular_addition(*task);
  BOOST_TEST(d.p == 23);
  BOOST_TEST(d.T == 3);
  BOOST_TEST(d.answer_position == 2);
  int held = 0;
  for (uint8_t h : d.held_out) held += h;
  BOOST_TEST(held == task->split_size(true));  // 370 of the 529 pairs
  // Pair (a, b) is row a * p + b, "a b =".
  BOOST_TEST(d.inputs[(7 * 23 + 11) * 3 + 0] == *task->token_id("7"));
  BOOST_TEST(d.inputs[(7 * 23 + 11) * 3 + 1] == *task->token_id("11"));
  BOOST_TEST(d.inputs[(7 * 23 + 11) * 3 + 2] == *task->token_id("="));
  // The held-out side is the task's: the split's held-out ids are enumeration indices a + p b.
  for (int64_t id : task->split_ids(true)) BOOST_TEST(d.held_out[(id % 23) * 23 + id / 23] == 1);
}

BOOST_AUTO_TEST_CASE(anything_but_modular_addition_of_two_operands_mod_odd_p_is_refused) {
  for (const train::TaskConfig& c : {train::TaskConfig{"reverse", 10, 4}, train::TaskConfig{"modadd", 23, 3},
                                     train::TaskConfig{"modadd_bare", 24, 2}})
    BOOST_CHECK_THROW(analysis::modular_addition(*train::make_task(c, 1)), std::invalid_argument);
  BOOST_CHECK_NO_THROW(analysis::modular_addition(*train::make_task(train::TaskConfig{"modadd", 23, 2}, 1)));
}
