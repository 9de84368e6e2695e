// Attention entropy (analysis/entropy.h) on the committed induction_small run: each head's number is the
// mean over the held-out rows of -sum w log w computed here by hand from the patterns captured on the same
// sequences, each layer's the mean of its heads, `uniform` the mean of log(i + 1); a row's entropy in closed
// form; the user's sequences give what the same held-out sequence gives; the JSON round-trips; a bad request
// is a one-line RequestError naming its field.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/capture.h"
#include "analysis/entropy.h"

namespace {

const std::string kRun = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small";
const auto kTolerance = boost::test_tools::tolerance(1e-9);

template <typename F>
std::string request_error(F f) {
  try {
    f();
  } catch (const analysis::RequestError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_rows_entropy_in_closed_form) {
  BOOST_TEST(analysis::attention_entropy({1.0f, 0.0f, 0.0f}) == 0.0);
  BOOST_TEST(analysis::attention_entropy({0.5f, 0.5f, 0.0f}) == std::log(2.0), kTolerance);
  BOOST_TEST(analysis::attention_entropy({0.25f, 0.25f, 0.25f, 0.25f}) == std::log(4.0), kTolerance);
  // 0.9 and 0.1: -(0.9 log 0.9 + 0.1 log 0.1) = 0.325083...
  BOOST_TEST(analysis::attention_entropy({0.9f, 0.1f}) == 0.3250829733914482,
             boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(each_head_is_the_mean_row_entropy_of_its_captured_patterns) {
  analysis::StudyRun run = analysis::open_run(kRun);
  analysis::EntropyRequest request;
  request.n = 5;
  const findings::EntropyResult r = analysis::entropy(run, request).result;

  // By hand, from the patterns the hooks capture on the same five held-out sequences.
  const train::Batch batch = run.task->eval_set(run.config.seed, 5);
  const std::vector<findings::Probe> probes = analysis::capture_attention(*run.model, *run.task, batch);
  std::map<std::pair<int, int>, double> sum;
  double uniform = 0;
  for (const findings::Probe& probe : probes) {
    for (const findings::HeadMap& map : probe.maps) {
      for (int i = 0; i < batch.T; ++i) {
        double h = 0;
        for (int j = 0; j <= i; ++j) {
          const double w = map.weights[i][j];
          if (w > 0) h -= w * std::log(w);
        }
        sum[{map.layer, map.head}] += h;
      }
    }
    for (int i = 0; i < batch.T; ++i) uniform += std::log(i + 1.0);
  }
  const double rows = 5.0 * batch.T;

  BOOST_TEST(r.sequences == 5);
  BOOST_TEST(r.rows == 5 * batch.T);
  BOOST_TEST(r.uniform == uniform / rows, kTolerance);
  BOOST_TEST_REQUIRE(r.heads.size() == 4u);  // 2 layers x 2 heads
  BOOST_TEST_REQUIRE(r.layers.size() == 2u);
  for (const findings::HeadEntropy& h : r.heads) {
    BOOST_TEST_CONTEXT("layer " << h.layer << " head " << h.head) {
      BOOST_TEST(h.entropy == sum.at({h.layer, h.head}) / rows, kTolerance);
      BOOST_TEST(h.entropy >= 0.0);
      BOOST_TEST(h.entropy <= r.uniform + 1e-6);
    }
  }
  BOOST_TEST(r.layers[1] == (r.heads[2].entropy + r.heads[3].entropy) / 2, kTolerance);
  // A trained induction model's heads are not all alike: some look at one key, some spread.
  BOOST_TEST(std::fabs(r.heads[0].entropy - r.heads[3].entropy) > 1e-3);

  const findings::EntropyResult back = findings::entropy_from_json(findings::entropy_to_json(r));
  BOOST_TEST(back.heads.size() == r.heads.size());
  BOOST_TEST(back.heads[3].entropy == r.heads[3].entropy);
  BOOST_TEST(back.uniform == r.uniform);
  BOOST_TEST(findings::entropy_to_json(back) == findings::entropy_to_json(r));
}

BOOST_AUTO_TEST_CASE(the_users_sequence_gives_what_the_same_held_out_sequence_gives) {
  analysis::StudyRun run = analysis::open_run(kRun);
  analysis::EntropyRequest held_out;
  held_out.n = 1;
  const findings::EntropyResult a = analysis::entropy(run, held_out).result;

  // The same sequence given as ids: a whole sequence of the task, of which the model reads all but the last.
  const train::Batch batch = run.task->eval_set(run.config.seed, 1);
  analysis::Sequence s;
  for (int32_t id : batch.inputs) s.ids.push_back(id);
  s.ids.push_back(batch.inputs.back());
  analysis::EntropyRequest given;
  given.ids = {s};
  const findings::EntropyResult b = analysis::entropy(run, given).result;
  BOOST_TEST(b.sequences == 1);
  BOOST_TEST_REQUIRE(b.heads.size() == a.heads.size());
  for (size_t k = 0; k < a.heads.size(); ++k)
    BOOST_TEST(b.heads[k].entropy == a.heads[k].entropy, kTolerance);
}

BOOST_AUTO_TEST_CASE(a_bad_request_is_one_line_naming_its_field) {
  analysis::StudyRun run = analysis::open_run(kRun);
  analysis::EntropyRequest negative;
  negative.n = -1;
  BOOST_TEST(request_error([&] { analysis::entropy(run, negative); }) == "n: must be >= 0, got -1");

  analysis::EntropyRequest both;
  both.n = 3;
  both.ids = {analysis::Sequence{{}, "BOS 1 2", {}}};
  BOOST_TEST(request_error([&] { analysis::entropy(run, both); }).find("n: goes with the held-out") == 0u);

  analysis::EntropyRequest short_sequence;
  short_sequence.ids = {analysis::Sequence{{}, "BOS 1 2", {}}};
  const std::string e = request_error([&] { analysis::entropy(run, short_sequence); });
  BOOST_TEST(e.find("ids[0]: expected a whole sequence of the task") == 0u, e);
  BOOST_TEST(e.find('\n') == std::string::npos);
}
