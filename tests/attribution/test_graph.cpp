// Attribution graphs (attribution/graph.h) and transcoders (dictionary/transcoder.h). On the trained
// induction_small model (attention-only) and on a short modadd run with transcoders (ReLU with a skip, TopK
// without): the local replacement model reproduces the float64 model's feature pre-activations and demeaned
// logits (1e-9); for EVERY source node of the unpruned graph, adding one more unit of its contribution (its
// multiplier 1 -> 2) in the frozen affine model changes every feature's pre-activation and every target
// logit by exactly that node's column of the adjacency matrix (computed the other way, backward from each
// target), float64 within 1e-9; each target's incoming direct effects plus its bias (its value with every
// source at zero) sum to its value (1e-9); every edge's split by path (through heads and skips) sums to the
// edge, and every head's QK attribution (source-pair terms plus the rest) to the model's score (1e-9).
// graph.json has Neuronpedia's required fields and its links name its nodes; the transcoder tool trains,
// saves, reloads and evaluates per-layer transcoders, with a resumed training equal to an uninterrupted one,
// and refuses bad layers in one line; a graph's feature nodes carry their top examples from the layer's
// features.json (none, and no "examples" field, once the pages are gone). The same exactness holds with
// cross-layer transcoders (a layer-0 feature writing to both MLP outputs) on induction_small and modadd; the
// cross-layer tool trains, resumes bit-exactly and feeds the graph; the cross-layer loss's gradients match
// finite differences in float64.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>

#include "attribution/graph.h"
#include "autograd/gradcheck.h"
#include "common/temp_dir.h"
#include "common/trained_run.h"
#include "dictionary/clt.h"
#include "dictionary/transcoder.h"
#include "io/run_layout.h"
#include "train/run_folder.h"
#include "train/trainer.h"

namespace {

const std::string kInduction = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small";

// Checks the three exactness properties on `rm`; returns the worst error seen.
double check_exact(const attribution::LocalReplacement& rm, int qk_layers, int qk_heads, bool all_queries) {
  const int64_t N = rm.size(), F = rm.n_features(), K = rm.n_logits();
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(N);
  const Eigen::VectorXd base = rm.forward(ones);
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < F; ++i) targets.push_back(i);
  for (int64_t k = 0; k < K; ++k) targets.push_back(N - K + k);
  double worst = 0;
  // The replacement is the model on the prompt.
  for (int64_t t : targets) worst = std::max(worst, std::abs(base[t] - rm.model_values()[t]));
  BOOST_TEST(worst < 1e-9, "replacement vs model: " << worst);
  const Eigen::MatrixXd A = rm.adjacency();
  // Every source (features, errors, embeddings, positions), one at a time.
  double worst_column = 0;
  int64_t sources = 0;
  for (int64_t s = 0; s < N - K; ++s) {
    Eigen::VectorXd m = ones;
    m[s] = 2;
    const Eigen::VectorXd delta = rm.forward(m) - base;
    for (int64_t t : targets) worst_column = std::max(worst_column, std::abs(delta[t] - A(t, s)));
    ++sources;
  }
  BOOST_TEST(sources == F + rm.n_errors() + 2 * rm.n_tokens());
  BOOST_TEST(worst_column < 1e-9, "column vs intervention: " << worst_column);
  // Direct effects plus bias are the value.
  const Eigen::VectorXd bias = rm.forward(Eigen::VectorXd::Zero(N));
  double worst_sum = 0;
  for (int64_t t : targets) worst_sum = std::max(worst_sum, std::abs(A.row(t).sum() + bias[t] - base[t]));
  BOOST_TEST(worst_sum < 1e-9, "edges + bias vs value: " << worst_sum);
  // The test can fail: the matrix is not empty, and an edge from a later layer never exists.
  BOOST_TEST(A.cwiseAbs().maxCoeff() > 1e-3);
  for (int64_t t = 0; t < F; ++t)
    for (int64_t s = 0; s < F; ++s)
      if (rm.nodes()[s].layer >= rm.nodes()[t].layer) BOOST_TEST(A(t, s) == 0.0);
  // Every edge split by path (heads, skips) sums to the edge; every head's QK score to the model's.
  double worst_paths = 0;
  int64_t multi_head = 0;
  for (int64_t t : targets) {
    std::vector<int64_t> sources;
    for (int64_t s = 0; s < N - K; ++s)
      if (!(rm.nodes()[s].layer >= 0 && t < F && rm.nodes()[s].layer >= rm.nodes()[t].layer))
        sources.push_back(s);
    const std::vector<std::vector<attribution::PathTerm>> paths = rm.edge_paths(t, sources);
    for (size_t i = 0; i < sources.size(); ++i) {
      double sum = 0;
      for (const attribution::PathTerm& term : paths[i]) {
        sum += term.weight;
        multi_head += term.steps.size() >= 2;
      }
      worst_paths = std::max(worst_paths, std::abs(sum - A(t, sources[i])));
    }
  }
  BOOST_TEST(worst_paths < 1e-9, "paths vs edge: " << worst_paths);
  BOOST_TEST(multi_head > 0);  // paths through two heads exist and are counted
  double worst_qk = 0;
  const int T = static_cast<int>(rm.n_tokens());
  for (int layer = 0; layer < qk_layers; ++layer)
    for (int head = 0; head < qk_heads; ++head)
      for (int q = T - 1; q >= (all_queries ? 0 : T - 1); --q)
        for (int k = 0; k <= q; ++k) {
          const attribution::QkAttribution a = rm.qk_attribution(layer, head, q, k);
          worst_qk = std::max(worst_qk, std::abs(a.terms.sum() + a.rest - a.score));
        }
  BOOST_TEST(worst_qk < 1e-9, "QK terms vs score: " << worst_qk);
  BOOST_TEST_MESSAGE("paths " << worst_paths << ", QK " << worst_qk);
  BOOST_TEST_MESSAGE(N << " nodes (" << F << " features): replacement " << worst << ", columns "
                       << worst_column << ", sums " << worst_sum);
  return std::max({worst, worst_column, worst_sum});
}

std::vector<int32_t> top_tokens(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids, int k) {
  ag::NoGradScope no_grad;
  const int64_t T = static_cast<int64_t>(ids.size());
  const ag::Tensor<float> logits = model.forward(ids, 1, T);
  const int64_t V = logits.size(2);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  const float* row = logits.data() + (T - 1) * V;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  order.resize(k);
  return order;
}

void check_schema(const nlohmann::json& g) {
  for (const char* key : {"metadata", "qParams", "nodes", "links"}) BOOST_TEST(g.contains(key), key);
  for (const char* key : {"slug", "scan", "transcoder_list", "prompt_tokens", "prompt"})
    BOOST_TEST(g["metadata"].contains(key), key);
  for (const char* key : {"pinnedIds", "supernodes", "linkType", "clickedId", "sg_pos"})
    BOOST_TEST(g["qParams"].contains(key), key);
  std::set<std::string> ids;
  int logits = 0;
  for (const auto& n : g["nodes"]) {
    for (const char* key : {"node_id", "feature", "layer", "ctx_idx", "feature_type", "jsNodeId"})
      BOOST_TEST(n.contains(key), key);
    BOOST_TEST(n["layer"].is_string());
    BOOST_TEST(ids.insert(n["node_id"].get<std::string>()).second, "duplicate node " << n["node_id"]);
    logits += n["feature_type"] == "logit";
  }
  BOOST_TEST(logits >= 1);
  BOOST_TEST(g["links"].size() >= 1u);
  for (const auto& l : g["links"]) {
    BOOST_TEST(ids.count(l["source"].get<std::string>()) == 1u);
    BOOST_TEST(ids.count(l["target"].get<std::string>()) == 1u);
    BOOST_TEST(l["weight"].is_number());
  }
}

// A short modadd run in `dir`.
void train_modadd(const std::string& dir) {
  testing::train_run(
      dir, "modadd.json",
      {"train.steps=60", "train.warmup=5", "train.eval_every=10000", "train.eval_size=32",
       "output.attention_every=0", "output.checkpoint_every=10000", "model.d_model=32", "model.d_ff=64"});
}

// Transcoders trained on `run` (two layers) with the `config` file two ways: stopped at once (in layer 0)
// into `resumed_out`, then resumed there; and in one go into the run's folder (`plain`, its request kept).
// Checks that the resumed one ran to its end and that the plain one's evaluation is finite and active.
struct TranscoderTrainings {
  analysis::Output<dictionary::TranscoderOutcome> resumed, plain;
  dictionary::TranscoderRequest plain_request;
};
TranscoderTrainings train_transcoders(analysis::StudyRun& run, const std::string& config,
                                      const std::string& resumed_out, bool cross_layer) {
  dictionary::TranscoderRequest stopped;
  stopped.cross_layer = cross_layer;
  stopped.config = config;
  stopped.out = resumed_out;
  std::atomic<bool> stop{true};
  stopped.stop = &stop;
  BOOST_TEST(dictionary::transcoder(run, stopped).result.stopped_layer == 0);
  dictionary::TranscoderRequest resumed;
  resumed.cross_layer = cross_layer;
  resumed.out = resumed_out;
  resumed.resume = true;
  TranscoderTrainings t;
  t.resumed = dictionary::transcoder(run, resumed);
  t.plain_request.cross_layer = cross_layer;
  t.plain_request.config = config;
  t.plain = dictionary::transcoder(run, t.plain_request);
  BOOST_TEST(t.resumed.result.stopped_layer == -1);
  BOOST_TEST(t.plain.result.eval.layers.size() == 2u);
  for (const auto& l : t.plain.result.eval.layers) {
    BOOST_TEST(std::isfinite(l.explained_variance));
    BOOST_TEST(l.l0 > 0);
  }
  BOOST_TEST(std::isfinite(t.plain.result.eval.ce_replaced));
  return t;
}

}  // namespace

// Random transcoders for every MLP layer of `model`: layer 0 ReLU with a skip, the others TopK k 7; with
// `thresholded`, JumpReLU thresholds in [0, 0.5) on every layer instead (a BatchTopK dictionary's inference
// is the same).
std::vector<attribution::LayerTranscoder> random_transcoders(const nn::CausalLM<float>& model, int64_t d_sae,
                                                             bool thresholded = false) {
  const int64_t D = model.shape.d_model;
  ag::Rng rng(5);
  std::vector<attribution::LayerTranscoder> tcs(model.blocks.size());
  for (size_t l = 0; l < tcs.size(); ++l) {
    const bool skip = l == 0;
    tcs[l].params = dictionary::init_transcoder({D, D, true, skip}, d_sae, rng);
    for (int64_t i = 0; i < tcs[l].params.b_enc.numel(); ++i)
      tcs[l].params.b_enc.data()[i] = static_cast<float>(0.3 * rng.normal());
    if (skip)
      for (int64_t i = 0; i < tcs[l].params.W_skip.numel(); ++i)
        tcs[l].params.W_skip.data()[i] = static_cast<float>(0.1 * rng.normal());
    tcs[l].activation = skip ? dictionary::SaeActivation::relu : dictionary::SaeActivation::topk;
    tcs[l].k = 7;
    if (thresholded) {
      tcs[l].activation = dictionary::SaeActivation::jumprelu;
      tcs[l].params.threshold = ag::Tensor<float>::empty({d_sae});
      for (int64_t j = 0; j < d_sae; ++j)
        tcs[l].params.threshold.data()[j] = static_cast<float>(0.5 * rng.uniform());
    }
  }
  return tcs;
}

BOOST_AUTO_TEST_CASE(induction_small_graph_is_exact) {
  // The committed induction model (it has MLPs) with random transcoders.
  const train::LoadedRun run = train::load_run(kInduction);
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  const std::vector<int32_t> targets = top_tokens(*run.model, ids, 3);
  const attribution::LocalReplacement rm(*run.model, ids, random_transcoders(*run.model, 32), targets,
                                         {0.5, 0.3, 0.2});
  BOOST_TEST(rm.n_features() > 20);
  BOOST_TEST(rm.n_errors() == static_cast<int64_t>(run.model->blocks.size() * ids.size()));
  check_exact(rm, 2, 2, true);
}

// A model of shape s from seed `seed`, every parameter moved by 0.2 N(0, 1): biases and norms away from
// their initial values, so each term the graph reads is exercised.
namespace {
std::unique_ptr<nn::CausalLM<float>> noisy_model(const nn::ModelShape& s, uint64_t seed) {
  ag::Rng rng(seed);
  auto model = std::make_unique<nn::CausalLM<float>>(s, rng);
  for (const auto& p : model->named_parameters())
    for (int64_t i = 0; i < p.tensor->numel(); ++i)
      p.tensor->data()[i] += static_cast<float>(0.2 * rng.normal());
  return model;
}
}  // namespace

// Qwen2's attention (q/k/v biases without an output bias, grouped-query heads) on RMSNorm and a gated MLP,
// random weights: the graph reads the model through its view and stays exact. Learned positions: the QK
// attribution the check includes is refused on rotary ones.
BOOST_AUTO_TEST_CASE(qkv_bias_graph_is_exact) {
  nn::ModelShape s;
  s.vocab = 17, s.max_len = 12, s.d_model = 16, s.n_heads = 4, s.n_layers = 2, s.d_ff = 24;
  s.norm = nn::NormKind::rms, s.activation = nn::Activation::swiglu, s.bias = false, s.qkv_bias = true;
  s.n_kv_heads = 2;
  const std::unique_ptr<nn::CausalLM<float>> made = noisy_model(s, 3);
  const nn::CausalLM<float>& model = *made;
  const std::vector<int32_t> ids = {1, 5, 9, 2, 5, 9, 3, 7};
  const attribution::LocalReplacement rm(model, ids, random_transcoders(model, 24), top_tokens(model, ids, 3),
                                         {0.5, 0.3, 0.2});
  BOOST_TEST(rm.n_features() > 10);
  check_exact(rm, 2, 4, true);
}

// A parallel block (attention and the MLP both read the block's input, as GPT-J and GPT-NeoX have it), a
// final logit softcap (Gemma 2's) and a sliding window: the replacement runs the model's own forward, so it
// follows each; the logits are taken before the softcap, where they are linear in the stream. The path split
// of a parallel block never passes a head and the skip in one layer.
BOOST_AUTO_TEST_CASE(parallel_softcap_graph_is_exact) {
  nn::ModelShape s;
  s.vocab = 19, s.max_len = 12, s.d_model = 16, s.n_heads = 4, s.n_layers = 2, s.d_ff = 32;
  s.parallel = true, s.logit_softcap = 5.0, s.attn_window = {3, 0};
  const std::unique_ptr<nn::CausalLM<float>> made = noisy_model(s, 5);
  const nn::CausalLM<float>& model = *made;
  const std::vector<int32_t> ids = {1, 5, 9, 2, 5, 9, 3, 7};
  const attribution::LocalReplacement rm(model, ids, random_transcoders(model, 24), top_tokens(model, ids, 3),
                                         {0.5, 0.3, 0.2});
  BOOST_TEST(rm.n_features() > 10);
  check_exact(rm, 2, 4, true);
  for (int64_t t = rm.size() - rm.n_logits(); t < rm.size(); ++t)
    for (int64_t src = 0; src < rm.n_features(); ++src) {
      if (rm.nodes()[src].layer != 0) continue;
      for (const attribution::PathTerm& p : rm.edge_paths(t, src))
        for (size_t i = 1; i < p.steps.size(); ++i)
          BOOST_TEST(!(p.steps[i].first == p.steps[i - 1].first && p.steps[i].second == -1));
    }
}

BOOST_AUTO_TEST_CASE(attention_only_induction_graph_is_exact) {
  // configs/induction.json's model (attention-only: no transcoder, no error node), trained briefly.
  testing::TempDir tmp;
  const std::string dir = tmp.file("induction");
  testing::train_run(dir, "induction.json",
                     {"train.steps=150", "train.warmup=5", "train.eval_every=10000", "train.eval_size=32",
                      "output.attention_every=0", "output.checkpoint_every=10000"});
  const train::LoadedRun run = train::load_run(dir);
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  const attribution::LocalReplacement rm(*run.model, ids,
                                         std::vector<attribution::LayerTranscoder>(run.model->blocks.size()),
                                         top_tokens(*run.model, ids, 3), {0.5, 0.3, 0.2});
  BOOST_TEST(rm.n_features() == 0);
  BOOST_TEST(rm.n_errors() == 0);
  check_exact(rm, 2, 4, false);
  // The tool on the same run, saved, and its graph.json; timed.
  analysis::StudyRun open = analysis::open_run(dir);
  attribution::GraphRequest r;
  r.input.ids.assign(ids.begin(), ids.end());
  r.save = "g";
  r.qk = "1.0." + std::to_string(ids.size() / 2);
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = attribution::graph(open, r);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("induction graph (" << ids.size() << " tokens): " << seconds << " s");
  BOOST_TEST(out.wrote.size() == 4u);  // graph.json, adjacency.npy, graph.html, report.html
  check_schema(nlohmann::json::parse(std::ifstream(io::layout::graph_json(io::layout::graph_dir(dir, "g")))));
  BOOST_TEST(out.result.replacement_score == 1.0);  // no error node
  BOOST_TEST(out.result.completeness_score == 1.0);
  BOOST_TEST_REQUIRE(out.result.qk.size() == 1u);
  const findings::GraphQk& qk = out.result.qk[0];
  BOOST_TEST(std::abs(qk.terms_total + qk.rest - qk.score) < 1e-9);
  BOOST_TEST(qk.top.size() == 12u);
  r.qk = "1.0.99";
  try {
    attribution::graph(open, r);
    BOOST_TEST(false);
  } catch (const analysis::RequestError& e) {
    BOOST_TEST(std::string(e.what()).rfind("qk: expected LAYER.HEAD.KEY", 0) == 0);
  }
}

BOOST_AUTO_TEST_CASE(modadd_graph_is_exact_with_transcoders) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("modadd");
  train_modadd(dir);
  const train::LoadedRun run = train::load_run(dir);
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  const std::vector<attribution::LayerTranscoder> tcs = random_transcoders(*run.model, 48);
  const std::vector<int32_t> targets = top_tokens(*run.model, ids, 4);
  const attribution::LocalReplacement rm(*run.model, ids, tcs, targets, {0.4, 0.3, 0.2, 0.1});
  BOOST_TEST(rm.n_features() > 20);
  BOOST_TEST(rm.n_errors() == static_cast<int64_t>(tcs.size() * ids.size()));
  check_exact(rm, 2, 1, false);
  // JumpReLU (and BatchTopK's inference): the features above their thresholds, as exact.
  const std::vector<attribution::LayerTranscoder> jumps = random_transcoders(*run.model, 48, true);
  const attribution::LocalReplacement jump(*run.model, ids, jumps, targets, {0.4, 0.3, 0.2, 0.1});
  BOOST_TEST(jump.n_features() > 20);
  int64_t below = 0;  // features at or under their threshold (none should be a node)
  for (int64_t i = 0; i < jump.n_features(); ++i) {
    const findings::GraphNode& n = jump.nodes()[i];
    below += !(n.activation > jumps[n.layer].params.threshold.data()[n.index]);
  }
  BOOST_TEST(below == 0);
  check_exact(jump, 2, 1, false);
}

BOOST_AUTO_TEST_CASE(transcoder_tool_trains_resumes_and_feeds_the_graph) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("modadd");
  train_modadd(dir);
  const std::string config = tmp.file("tc.json");
  std::ofstream(config) << R"({"steps": 40, "batch_size": 64, "buffer_tokens": 1024, "eval_sequences": 16,
                               "checkpoint_every": 10, "skip": true})";
  analysis::StudyRun run = analysis::open_run(dir);
  // Stopped at once in layer 0, then resumed: the same transcoders as one uninterrupted training.
  const std::string resumed_out = tmp.file("resumed");
  const TranscoderTrainings t = train_transcoders(run, config, resumed_out, false);
  const auto x = dictionary::load_transcoders(*run.model, resumed_out);
  const auto y = dictionary::load_transcoders(*run.model, io::layout::transcoders_root(dir));
  for (size_t l = 0; l < x.size(); ++l) {
    BOOST_TEST(x[l].W_skip.defined());
    BOOST_TEST(x[l].W_enc.to_vector() == y[l].W_enc.to_vector());
    BOOST_TEST(x[l].W_skip.to_vector() == y[l].W_skip.to_vector());
  }
  // A graph from the saved transcoders, saved, with its schema and matrix file.
  attribution::GraphRequest g;
  g.input.tokens = "";
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  g.input.ids.assign(ids.begin(), ids.end());
  g.save = "first";
  const auto out = attribution::graph(run, g);
  BOOST_TEST(out.wrote.size() == 4u);  // graph.json, adjacency.npy, graph.html, report.html
  check_schema(
      nlohmann::json::parse(std::ifstream(io::layout::graph_json(io::layout::graph_dir(dir, "first")))));
  const int64_t n = static_cast<int64_t>(out.result.nodes.size());
  BOOST_TEST(std::filesystem::file_size(io::layout::graph_matrix(io::layout::graph_dir(dir, "first"))) ==
             static_cast<uintmax_t>(128 + n * n * 8));
  BOOST_TEST(out.result.replacement_score >= 0.0);
  BOOST_TEST(out.result.replacement_score <= 1.0);
  // Each kept feature node carries its top examples from its layer's features.json (a window around the
  // peak, the peak token and activation the page's) and its logit effects.
  const std::string tc_root = io::layout::transcoders_root(dir);
  const nlohmann::json saved =
      nlohmann::json::parse(std::ifstream(io::layout::graph_json(io::layout::graph_dir(dir, "first"))));
  int with_examples = 0, features = 0;
  for (const nlohmann::json& node : saved["nodes"]) {
    if (node["feature_type"] != "cross layer transcoder") continue;
    ++features;
    int layer = 0, index = 0, pos = 0;
    BOOST_TEST_REQUIRE(
        std::sscanf(node["node_id"].get<std::string>().c_str(), "%d_%d_%d", &layer, &index, &pos) == 3);
    const nlohmann::json page = nlohmann::json::parse(
        std::ifstream(io::layout::transcoder_features_json(io::layout::transcoder_dir(tc_root, layer))));
    const nlohmann::json* entry = nullptr;
    for (const nlohmann::json& f : page)
      if (f["index"] == index) entry = &f;
    BOOST_TEST_REQUIRE(entry != nullptr);
    BOOST_TEST_REQUIRE(node.contains("examples"));
    const nlohmann::json& ex = node["examples"];
    BOOST_TEST(ex.size() == std::min<size_t>(5, (*entry)["examples"].size()));
    for (size_t k = 0; k < ex.size(); ++k) {
      const nlohmann::json& full = (*entry)["examples"][k];
      const int peak = ex[k]["peak"].get<int>();
      BOOST_TEST(ex[k]["tokens"][peak] == full["tokens"][full["position"].get<int>()]);
      BOOST_TEST(ex[k]["max"].get<double>() == full["max"].get<double>());
      BOOST_TEST(ex[k]["tokens"].size() <= 12u);
    }
    with_examples += !ex.empty();
    BOOST_TEST(node["logit_effects"]["promoted"].size() == 5u);
  }
  BOOST_TEST(features > 0);
  BOOST_TEST(with_examples > 0);
  {
    std::ifstream in(io::layout::graph_page(io::layout::graph_dir(dir, "first")));
    const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_TEST(page.find("\"page\":true") != std::string::npos);
  }
  // Without the feature pages: no examples, and the page's read-out says so.
  for (int l = 0; l < 2; ++l)
    std::filesystem::remove(io::layout::transcoder_features_json(io::layout::transcoder_dir(tc_root, l)));
  g.save = "second";
  const auto bare = attribution::graph(run, g);
  for (const auto& node : bare.result.nodes) {
    BOOST_TEST(!node.has_page);
    BOOST_TEST(node.examples.empty());
  }
  const nlohmann::json bare_json =
      nlohmann::json::parse(std::ifstream(io::layout::graph_json(io::layout::graph_dir(dir, "second"))));
  for (const nlohmann::json& node : bare_json["nodes"]) BOOST_TEST(!node.contains("examples"));
  // Bad layers are one line naming the field.
  dictionary::TranscoderRequest bad;
  bad.layers = "0,7";
  try {
    dictionary::transcoder(run, bad);
    BOOST_TEST(false);
  } catch (const analysis::RequestError& e) {
    BOOST_TEST(std::string(e.what()) == "layers: '7' is not a layer of this model (0..1)");
  }
}

BOOST_AUTO_TEST_CASE(a_transcoders_scales_fold_into_its_saved_weights) {
  // Trained on x * 2.5 and y * 0.4, saved to read raw x and write raw y: the same prediction, divided by
  // the target's scale; ReLU and TopK, with and without the skip.
  for (const bool skip : {false, true})
    for (const dictionary::SaeActivation act :
         {dictionary::SaeActivation::relu, dictionary::SaeActivation::topk}) {
      dictionary::SaeConfig c;
      c.d_sae = 24;
      c.activation = act;
      c.k = 5;
      c.skip = skip;
      c.batch_size = 32;
      const float in_scale = 2.5f, out_scale = 0.4f;
      dictionary::SaeTrainer t(c, {6, 4, true, skip}, {}, in_scale, out_scale);
      ag::Rng rng(9);
      ag::Tensor<float> x = ag::Tensor<float>::empty({32, 6}), y = ag::Tensor<float>::empty({32, 4});
      for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(rng.normal());
      for (int64_t i = 0; i < y.numel(); ++i) y.data()[i] = static_cast<float>(rng.normal());
      for (int step = 0; step < 5; ++step) t.step(x, y);  // biases and skip move off zero
      ag::NoGradScope no_grad;
      ag::Tensor<float> xs = x.detach();
      for (int64_t i = 0; i < xs.numel(); ++i) xs.data()[i] *= in_scale;
      ag::Tensor<float> ys = y.detach();
      for (int64_t i = 0; i < ys.numel(); ++i) ys.data()[i] *= out_scale;
      const dictionary::SaeOutput<float> trained = dictionary::sae_forward(t.params(), xs, act, 0.f, c.k, ys);
      const dictionary::SaeParams<float> raw = t.raw_params();
      BOOST_TEST(raw.transcoder);
      BOOST_TEST(raw.W_skip.defined() == skip);
      const dictionary::SaeOutput<float> folded = dictionary::sae_forward(raw, x, act, 0.f, c.k, y);
      double worst = 0;
      for (int64_t i = 0; i < folded.x_hat.numel(); ++i)
        worst =
            std::max(worst, std::abs(double(folded.x_hat.data()[i]) - trained.x_hat.data()[i] / out_scale));
      BOOST_TEST(worst < 1e-4, "skip " << skip << ": " << worst);
    }
}

namespace {

// A random cross-layer transcoder for every layer of `model` (layer l writing to every MLP output from l
// on), as LayerTranscoders: ReLU with a skip, or TopK k 7; b_enc and the skip moved off zero.
std::vector<attribution::LayerTranscoder> random_clt(const nn::CausalLM<float>& model, int64_t d_sae,
                                                     bool skip) {
  const int L = static_cast<int>(model.blocks.size());
  const int64_t D = model.shape.d_model;
  dictionary::SaeConfig c;
  c.d_sae = d_sae;
  c.skip = skip;
  c.activation = skip ? dictionary::SaeActivation::relu : dictionary::SaeActivation::topk;
  c.k = 7;
  const dictionary::CltTrainer t(c, L, D, {}, 1.f, 1.f);
  ag::Rng rng(6);
  std::vector<attribution::LayerTranscoder> tcs;
  for (const dictionary::SaeParams<float>& p : t.raw_params()) {
    attribution::LayerTranscoder tc{p, c.activation, c.k};
    for (int64_t i = 0; i < tc.params.b_enc.numel(); ++i)
      tc.params.b_enc.data()[i] = static_cast<float>(0.3 * rng.normal());
    if (skip)
      for (int64_t i = 0; i < tc.params.W_skip.numel(); ++i)
        tc.params.W_skip.data()[i] = static_cast<float>(0.1 * rng.normal());
    tcs.push_back(tc);
  }
  return tcs;
}

// The paths of the edges from layer-0 features that start by a write into a later layer's MLP output.
int64_t later_writes(const attribution::LocalReplacement& rm) {
  int64_t n = 0;
  const int64_t N = rm.size();
  for (int64_t s = 0; s < rm.n_features(); ++s) {
    if (rm.nodes()[s].layer != 0) continue;
    for (const attribution::PathTerm& p : rm.edge_paths(N - 1, s))
      n += !p.steps.empty() && p.steps[0].second == -2 && p.weight != 0;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_layer_graphs_are_exact) {
  // induction_small (2 layers with MLPs) with a ReLU CLT with skips, and a modadd run with a TopK one: a
  // feature of layer 0 writes to both MLP outputs, and every exactness property holds as per-layer.
  const train::LoadedRun run = train::load_run(kInduction);
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  const std::vector<attribution::LayerTranscoder> clt = random_clt(*run.model, 32, true);
  BOOST_TEST(clt[0].params.writes == 2);
  const attribution::LocalReplacement rm(*run.model, ids, clt, top_tokens(*run.model, ids, 3),
                                         {0.5, 0.3, 0.2});
  BOOST_TEST(rm.n_features() > 20);
  check_exact(rm, 2, 2, false);
  BOOST_TEST(later_writes(rm) > 0);
  testing::TempDir tmp;
  const std::string dir = tmp.file("modadd");
  train_modadd(dir);
  const train::LoadedRun m = train::load_run(dir);
  const std::vector<int32_t> mids = testing::first_eval_ids(m);
  const attribution::LocalReplacement mr(*m.model, mids, random_clt(*m.model, 48, false),
                                         top_tokens(*m.model, mids, 4), {0.4, 0.3, 0.2, 0.1});
  check_exact(mr, 2, 1, false);
  BOOST_TEST(later_writes(mr) > 0);
}

BOOST_AUTO_TEST_CASE(cross_layer_transcoder_trains_resumes_and_feeds_the_graph) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("modadd");
  train_modadd(dir);
  const std::string config = tmp.file("clt.json");
  std::ofstream(config) << R"({"steps": 40, "batch_size": 64, "buffer_tokens": 1024, "eval_sequences": 16,
                               "checkpoint_every": 10, "resample_every": 20})";
  analysis::StudyRun run = analysis::open_run(dir);
  // Stopped at once, then resumed: the same transcoder as one uninterrupted training.
  const std::string resumed_out = tmp.file("resumed");
  const TranscoderTrainings t = train_transcoders(run, config, resumed_out, true);
  BOOST_TEST(t.plain.result.eval.cross_layer);
  const auto x = dictionary::load_transcoders(*run.model, resumed_out);
  const auto y = dictionary::load_transcoders(*run.model, io::layout::transcoders_root(dir));
  for (size_t l = 0; l < x.size(); ++l) {
    BOOST_TEST(x[l].writes == static_cast<int64_t>(x.size() - l));
    BOOST_TEST(x[l].W_dec.to_vector() == y[l].W_dec.to_vector());
    BOOST_TEST(x[l].W_enc.to_vector() == y[l].W_enc.to_vector());
  }
  // The graph reads the folder; a layer-0 feature has edges into layer 1 and the logits.
  attribution::GraphRequest g;
  const std::vector<int32_t> ids = testing::first_eval_ids(run);
  g.input.ids.assign(ids.begin(), ids.end());
  const auto out = attribution::graph(run, g);
  BOOST_TEST(out.result.n_features > 0);
  BOOST_TEST(out.result.replacement_score >= 0.0);
  BOOST_TEST(out.result.completeness_score <= 1.0);
  // layers with cross_layer is one line naming the field.
  dictionary::TranscoderRequest bad = t.plain_request;
  bad.layers = "0";
  try {
    dictionary::transcoder(run, bad);
    BOOST_TEST(false);
  } catch (const analysis::RequestError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "layers: a cross-layer transcoder spans every layer; leave out layers");
  }
}

BOOST_AUTO_TEST_CASE(cross_layer_loss_gradients_in_float64) {
  // A 3-layer CLT of d_model 5, d_sae 6 on 7 tokens, ReLU with the L1 penalty and a skip, and TopK: every
  // parameter's gradient of the loss (reconstruction of every layer from the features at or below it)
  // by finite differences.
  const int L = 3;
  const int64_t D = 5, M = 6, N = 7;
  ag::Rng rng(3);
  auto randn = [&](ag::Shape s, double scale) {
    ag::Tensor<double> t = ag::Tensor<double>::empty(s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = scale * rng.normal();
    return t.set_requires_grad(true);
  };
  std::vector<ag::Tensor<double>> x, y, params;
  for (int l = 0; l < L; ++l) {
    x.push_back(randn({N, D}, 1.0).detach());
    y.push_back(randn({N, D}, 1.0).detach());
    for (const ag::Tensor<double>& t : {randn({D, M}, 0.5), randn({M}, 0.2), randn({M, (L - l) * D}, 0.4),
                                        randn({D}, 0.1), randn({D, D}, 0.2)})
      params.push_back(t);
  }
  for (const bool relu : {true, false}) {
    auto loss = [&](const std::vector<ag::Tensor<double>>& in) {
      std::vector<dictionary::SaeParams<double>> p(L);
      for (int l = 0; l < L; ++l) {
        p[l] = {in[5 * l],
                in[5 * l + 1],
                in[5 * l + 2],
                in[5 * l + 3],
                relu ? in[5 * l + 4] : ag::Tensor<double>(),
                true,
                {},
                L - l};
      }
      return dictionary::clt_forward(
                 p, x, relu ? dictionary::SaeActivation::relu : dictionary::SaeActivation::topk, 0.3, 3, y)
          .loss;
    };
    std::vector<ag::Tensor<double>> in;
    for (const ag::Tensor<double>& t : params) in.push_back(t.detach().set_requires_grad(true));
    const ag::GradcheckResult r = ag::gradcheck(loss, in);
    BOOST_TEST(r.worst() < 1e-6, (relu ? "relu: " : "topk: ") << r.report());
    // The loss is the sum of the layers' reconstructions: layer 2's reads all three layers' features.
    std::vector<dictionary::SaeParams<double>> p(L);
    for (int l = 0; l < L; ++l)
      p[l] = {params[5 * l], params[5 * l + 1], params[5 * l + 2], params[5 * l + 3], {}, true, {}, L - l};
    ag::NoGradScope no_grad;
    const dictionary::CltOutput<double> o =
        dictionary::clt_forward(p, x, dictionary::SaeActivation::relu, 0.0, 3, y);
    double by_hand = 0;
    for (int64_t r2 = 0; r2 < N; ++r2)
      for (int64_t k = 0; k < D; ++k) {
        double v = p[2].b_dec.data()[k] - y[2].data()[r2 * D + k];
        for (int l = 0; l < L; ++l)
          for (int64_t j = 0; j < M; ++j)
            v += o.f[l].data()[r2 * M + j] * p[l].W_dec.data()[j * (L - l) * D + (2 - l) * D + k];
        by_hand += v * v;
      }
    double layer2 = 0;
    for (int64_t i = 0; i < N * D; ++i) {
      const double d = o.y_hat[2].data()[i] - y[2].data()[i];
      layer2 += d * d;
    }
    BOOST_TEST(std::abs(by_hand - layer2) < 1e-9);
  }
}
