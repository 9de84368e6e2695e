// The induction circuit read off a pruned attribution graph (attribution/graph.h). configs/induction.json's
// model (attention-only), trained for 1000 steps at lr 0.005 (held-out exact match 1.0,
// its induction heads formed), on `BOS 5 9 3 7 12 8 2 5 9 3 7 12 8 2 5`, whose answer `9` follows the
// earlier `5`s at positions 1 and 8. With the default thresholds the pruned graph keeps the path
//   token `5` at 8 -> a previous-token head of layer 0 (moves it to position 9) -> an induction head of
//   layer 1 (reads position 9 from the last position) -> the logit of `9`,
// asserted on the head loadings of its links: the strongest link into the answer's logit is the
// embedding of `9` right after an earlier `5`, loaded most on a layer-1 head that the induction pattern
// ranks first on this prompt; the link from `5` at 8 loads most on a two-head path through a layer-0 head
// with a previous-token score >= 0.3 on this prompt and then that induction head. The head's QK attribution
// from the last position to key 9 is led by the pair (query: `5` at 15, key: `5` at 8), the key side's `5`
// having come from the position before: the previous-token step, seen from the score's side.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "analysis/detect.h"
#include "attribution/graph.h"
#include "common/temp_dir.h"
#include "common/trained_run.h"

namespace {

const char kPrompt[] = "BOS 5 9 3 7 12 8 2 5 9 3 7 12 8 2 5";

// The heads' scores against `pattern` on the prompt, by (layer, head).
std::vector<findings::HeadDetection> detect_on_prompt(analysis::StudyRun& run, const char* pattern) {
  analysis::DetectRequest r;
  r.pattern = pattern;
  r.input.tokens = kPrompt;
  return analysis::detect(run, r).result.heads;
}

// The loading of `link` with the largest magnitude.
std::pair<std::string, double> largest_path(const findings::GraphLink& link) {
  std::pair<std::string, double> best{"", 0};
  for (const auto& p : link.paths)
    if (std::abs(p.second) > std::abs(best.second)) best = p;
  return best;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pruned_induction_graph_runs_through_a_previous_token_and_an_induction_head) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("induction");
  testing::train_run(dir, "induction.json",
                     {"train.steps=1000", "train.lr=0.005", "train.threads=1", "train.eval_every=1000",
                      "train.eval_size=32", "output.attention_every=0", "output.checkpoint_every=10000"});
  analysis::StudyRun run = analysis::open_run(dir);

  attribution::GraphRequest r;
  r.input.tokens = kPrompt;
  const auto induction = detect_on_prompt(run, "induction");
  const auto previous = detect_on_prompt(run, "previous");
  findings::HeadDetection best_induction;
  for (const auto& h : induction)
    if (h.layer == 1 && h.score > best_induction.score) best_induction = h;
  BOOST_TEST_REQUIRE(best_induction.score > 0.3);
  const std::string induction_head = "L1.H" + std::to_string(best_induction.head);
  r.qk = "1." + std::to_string(best_induction.head) + ".9";
  const findings::AttributionGraph g = attribution::graph(run, r).result;

  // The answer's logit: the first target, `9`, with most of the probability.
  const int64_t answer = static_cast<int64_t>(g.nodes.size()) - g.n_logits;
  BOOST_TEST_REQUIRE(g.nodes[answer].token == "9");
  BOOST_TEST(g.nodes[answer].activation > 0.9);

  // The strongest kept link into it: `9` right after an earlier `5`, loaded most on the induction head.
  const findings::GraphLink* strongest = nullptr;
  for (const auto& l : g.links)
    if (l.target == answer && (!strongest || std::abs(l.weight) > std::abs(strongest->weight)))
      strongest = &l;
  BOOST_TEST_REQUIRE(strongest != nullptr);
  const findings::GraphNode& token = g.nodes[strongest->source];
  BOOST_TEST((token.kind == findings::GraphNodeKind::embedding && token.token == "9"));
  BOOST_TEST((token.position == 2 || token.position == 9), "position " << token.position);
  const auto [top_path, top_weight] = largest_path(*strongest);
  BOOST_TEST(top_path == induction_head, top_path << " " << top_weight);
  BOOST_TEST(top_weight > 0.5 * strongest->weight);

  // The kept link from `5` at 8 (the token before position 9): its largest loading goes through a layer-0
  // previous-token head, then the induction head.
  const findings::GraphLink* from_previous = nullptr;
  for (const auto& l : g.links)
    if (l.target == answer && g.nodes[l.source].kind == findings::GraphNodeKind::embedding &&
        g.nodes[l.source].position == 8)
      from_previous = &l;
  BOOST_TEST_REQUIRE(from_previous != nullptr);
  BOOST_TEST(g.nodes[from_previous->source].token == "5");
  const std::string path = largest_path(*from_previous).first;
  BOOST_TEST_MESSAGE("strongest link: " << strongest->weight << " via " << top_path << " " << top_weight
                                        << "; from '5' at 8: " << from_previous->weight << " via " << path);
  BOOST_TEST_REQUIRE(path.rfind("L0.H", 0) == 0);
  BOOST_TEST(path.substr(path.find('>') + 1) == induction_head, path);
  const int previous_head = std::stoi(path.substr(4, path.find('>') - 4));
  double previous_score = 0;
  for (const auto& h : previous)
    if (h.layer == 0 && h.head == previous_head) previous_score = h.score;
  BOOST_TEST(previous_score >= 0.3, "L0.H" << previous_head << " previous-token score " << previous_score);

  // The induction head's score from 15 to 9: its largest term pairs `5` at 15 with `5` at 8.
  BOOST_TEST_REQUIRE(g.qk.size() == 1u);
  const auto& [query_node, key_node, value] = g.qk[0].top[0];
  BOOST_TEST((g.nodes[query_node].kind == findings::GraphNodeKind::embedding &&
              g.nodes[query_node].position == 15 && g.nodes[query_node].token == "5"));
  BOOST_TEST((g.nodes[key_node].kind == findings::GraphNodeKind::embedding &&
              g.nodes[key_node].position == 8 && g.nodes[key_node].token == "5"));
  BOOST_TEST(value > 0.5 * g.qk[0].score);
}
