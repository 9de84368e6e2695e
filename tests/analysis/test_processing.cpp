// Weight processing (analysis/processing.h): the processed model gives the same log-probabilities (1e-5 in
// float32, 1e-10 in float64) on models with and without MLPs whose LayerNorms and biases are not the
// initial 1 and 0, and on the trained induction_small checkpoint; its LayerNorms are 1 and 0, its writing
// weights and unembedding are centred, and the original model is unchanged (without a norm, the same
// log-probabilities with the writers left as they are); every processed parameter of
// induction_small matches PyTorch's processing (fixture residual_small.json) to 1e-4.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "analysis/processing.h"
#include "common/fixture.h"
#include "train/run_folder.h"

namespace {

nn::ModelShape shape(bool attention_only) {
  nn::ModelShape s;
  s.vocab = 13;
  s.max_len = 9;
  s.d_model = 16;
  s.n_heads = 4;
  s.n_layers = 2;
  s.d_ff = 32;
  s.attention_only = attention_only;
  return s;
}

const std::vector<int32_t> kIds = {0, 4, 7, 2, 9, 4, 7, 12, 4, /* second */ 3, 3, 1, 0, 11, 5, 6, 2, 8};

template <typename T>
void perturb(nn::CausalLM<T>& model) {
  ag::Rng rng(17);
  for (const auto& p : model.named_parameters())
    for (int64_t i = 0; i < p.tensor->numel(); ++i) p.tensor->data()[i] += T(0.3 * rng.normal());
}

// log_softmax of the logits, (B*T*V) in double.
template <typename T>
std::vector<double> log_probs(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t B) {
  ag::NoGradScope no_grad;
  const int64_t t = static_cast<int64_t>(ids.size()) / B, V = model.shape.vocab;
  const ag::Tensor<T> logits = model.forward(ids, B, t);
  std::vector<double> out(static_cast<size_t>(logits.numel()));
  for (int64_t r = 0; r < B * t; ++r) {
    const T* row = logits.data() + r * V;
    double m = -1e300, z = 0;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, double(row[v]));
    for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - m);
    for (int64_t v = 0; v < V; ++v) out[r * V + v] = double(row[v]) - m - std::log(z);
  }
  return out;
}

template <typename T>
double worst_difference(const nn::CausalLM<T>& a, const nn::CausalLM<T>& b, const std::vector<int32_t>& ids,
                        int64_t B) {
  const std::vector<double> x = log_probs(a, ids, B), y = log_probs(b, ids, B);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

template <typename T>
void check(bool attention_only, double tolerance) {
  ag::Rng rng(4);
  nn::CausalLM<T> model(shape(attention_only), rng);
  perturb(model);
  const std::vector<T> before = model.lm_head.weight.to_vector();
  const auto processed = analysis::processed_weights(model);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= tolerance);
  BOOST_TEST((model.lm_head.weight.to_vector() == before), "the original is unchanged");
  // The processing did something: the logits themselves moved (the unembedding was centred).
  {
    ag::NoGradScope no_grad;
    const ag::Tensor<T> a = model.forward(kIds, 2, 9), b = processed->forward(kIds, 2, 9);
    BOOST_TEST(std::fabs(double(a.data()[0]) - double(b.data()[0])) > 1e-3);
  }
  // LayerNorms are 1 and 0; the writers and the unembedding have zero mean over d_model / the vocabulary.
  for (const auto& p : processed->named_parameters()) {
    const bool ln = p.name.find("ln") != std::string::npos;
    if (!ln) continue;
    const bool weight = p.name.find("weight") != std::string::npos;
    for (int64_t i = 0; i < p.tensor->numel(); ++i)
      BOOST_TEST(double(p.tensor->data()[i]) == (weight ? 1.0 : 0.0));
  }
  auto column_mean = [](const ag::Tensor<T>& W, int64_t c) {
    double s = 0;
    for (int64_t r = 0; r < W.size(0); ++r) s += double(W.data()[r * W.size(1) + c]);
    return s / double(W.size(0));
  };
  auto row_mean = [](const ag::Tensor<T>& W, int64_t r) {
    double s = 0;
    for (int64_t c = 0; c < W.size(1); ++c) s += double(W.data()[r * W.size(1) + c]);
    return s / double(W.size(1));
  };
  BOOST_TEST(std::fabs(column_mean(processed->blocks[1]->attn.wo.weight, 3)) < 1e-6);
  BOOST_TEST(std::fabs(column_mean(processed->lm_head.weight, 5)) < 1e-6);
  BOOST_TEST(std::fabs(row_mean(processed->tok_emb.weight, 2)) < 1e-6);
  BOOST_TEST(std::fabs(row_mean(processed->blocks[0]->attn.wq.weight, 1)) < 1e-6);
}

}  // namespace

BOOST_AUTO_TEST_CASE(same_log_probs_in_float32_within_1e_5) {
  for (bool attention_only : {false, true}) check<float>(attention_only, 1e-5);
}

BOOST_AUTO_TEST_CASE(same_log_probs_in_float64_within_1e_10) {
  for (bool attention_only : {false, true}) check<double>(attention_only, 1e-10);
}

// The grokking model's options: without a norm nothing is folded and the stream's writers stay as they are
// (its readers see the stream's mean); the unembedding is still centred over the vocabulary.
BOOST_AUTO_TEST_CASE(same_log_probs_without_a_norm) {
  nn::ModelShape s = shape(false);
  s.norm = nn::NormKind::none, s.activation = nn::Activation::relu, s.bias = false;
  ag::Rng rng(4);
  nn::CausalLM<double> model(s, rng);
  perturb(model);
  const auto processed = analysis::processed_weights(model);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
  BOOST_TEST((processed->tok_emb.weight.to_vector() == model.tok_emb.weight.to_vector()));
  BOOST_TEST((processed->lm_head.weight.to_vector() != model.lm_head.weight.to_vector()));
}

// RMSNorm: each weight is folded into its readers and left as ones, but nothing reads the stream centred,
// so the stream's writers keep their means; the unembedding is still centred over the vocabulary.
BOOST_AUTO_TEST_CASE(same_log_probs_with_rms_norm) {
  nn::ModelShape s = shape(false);
  s.norm = nn::NormKind::rms;
  ag::Rng rng(4);
  nn::CausalLM<double> model(s, rng);
  perturb(model);
  const auto processed = analysis::processed_weights(model);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
  BOOST_TEST((processed->tok_emb.weight.to_vector() == model.tok_emb.weight.to_vector()));
  BOOST_TEST(
      (processed->blocks[0]->attn.wo.weight.to_vector() == model.blocks[0]->attn.wo.weight.to_vector()));
  BOOST_TEST(
      (processed->blocks[0]->attn.wq.weight.to_vector() != model.blocks[0]->attn.wq.weight.to_vector()));
  for (const auto* norm :
       {processed->blocks[1]->ln1.get(), processed->blocks[1]->ln2.get(), processed->ln_f.get()}) {
    BOOST_TEST(!norm->bias.defined());
    for (double w : norm->weight.to_vector()) BOOST_TEST(w == 1.0);
  }
}

// A gated MLP: ln2 is folded into fc1 and the gate alike (LayerNorm and RMSNorm).
BOOST_AUTO_TEST_CASE(same_log_probs_with_a_gated_mlp) {
  for (nn::NormKind norm : {nn::NormKind::layer, nn::NormKind::rms}) {
    nn::ModelShape s = shape(false);
    s.norm = norm, s.activation = nn::Activation::swiglu;
    ag::Rng rng(4);
    nn::CausalLM<double> model(s, rng);
    perturb(model);
    const auto processed = analysis::processed_weights(model);
    BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
    BOOST_TEST((processed->blocks[0]->mlp->gate->weight.to_vector() !=
                model.blocks[0]->mlp->gate->weight.to_vector()));
    for (double w : processed->blocks[0]->ln2->weight.to_vector()) BOOST_TEST(w == 1.0);
  }
}

// Parallel blocks fold as sequential ones; tied embeddings come back untied (the embedding is centred as a
// writer, the unembedding over the vocabulary); soft-capped logits keep their unembedding uncentred (a
// shift of every logit changes the capped probabilities).
BOOST_AUTO_TEST_CASE(same_log_probs_with_parallel_blocks_tied_embeddings_and_a_softcap) {
  nn::ModelShape s = shape(false);
  s.parallel = true, s.tie_embeddings = true, s.logit_softcap = 2.0;
  auto row_mean = [](const ag::Tensor<double>& W, int64_t r) {
    double sum = 0;
    for (int64_t c = 0; c < W.size(1); ++c) sum += W.data()[r * W.size(1) + c];
    return sum / double(W.size(1));
  };
  auto column_mean = [](const ag::Tensor<double>& W, int64_t c) {
    double sum = 0;
    for (int64_t r = 0; r < W.size(0); ++r) sum += W.data()[r * W.size(1) + c];
    return sum / double(W.size(0));
  };
  ag::Rng rng(4);
  nn::CausalLM<double> model(s, rng);
  perturb(model);
  const auto processed = analysis::processed_weights(model);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
  BOOST_TEST(!processed->shape.tie_embeddings);
  BOOST_TEST(&processed->lm_head.weight != &processed->tok_emb.weight);
  BOOST_TEST(std::fabs(row_mean(processed->tok_emb.weight, 1)) < 1e-10);  // a centred writer
  // ln_f folded in, not centred over the vocabulary: lm_head's columns keep their means.
  BOOST_TEST((processed->lm_head.weight.to_vector() != model.tok_emb.weight.to_vector()));
  BOOST_TEST(std::fabs(column_mean(processed->lm_head.weight, 0)) > 1e-6);
  // Without the cap the same model's unembedding is centred.
  s.logit_softcap = 0;
  ag::Rng again(4);
  nn::CausalLM<double> uncapped(s, again);
  perturb(uncapped);
  const auto centred = analysis::processed_weights(uncapped);
  BOOST_TEST(worst_difference(uncapped, *centred, kIds, 2) <= 1e-10);
  BOOST_TEST(std::fabs(column_mean(centred->lm_head.weight, 0)) < 1e-10);
}

BOOST_AUTO_TEST_CASE(same_log_probs_on_a_trained_checkpoint) {
  const train::LoadedRun run =
      train::load_run(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small");
  const auto processed = analysis::processed_weights(*run.model);
  const std::vector<int32_t> ids = {0, 2, 5, 4, 8, 3, 10, 6, 4};
  BOOST_TEST(worst_difference(*run.model, *processed, ids, 1) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(matches_pytorch_to_1e_4) {
  const testing::Fixture f("residual_small.json");
  const train::LoadedRun run =
      train::load_run(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small");
  const auto processed = analysis::processed_weights(*run.model);
  double worst = 0;
  for (const auto& p : processed->named_parameters()) {
    BOOST_TEST_REQUIRE(f.has("processed." + p.name), p.name);
    const testing::Difference d = testing::compare(*p.tensor, f.tensor<double>("processed." + p.name));
    worst = std::max(worst, d.max_abs);
    BOOST_TEST(d.max_abs < 1e-4, p.name << ": " << d.max_abs);
  }
  BOOST_TEST_MESSAGE("processed weights: max |ours - PyTorch| = " << worst);
}

// fold_value_biases (import --process's fourth step) on grouped-query heads with rotary positions and a
// local window: wv.bias becomes 0, wo.bias takes Wo b_v (b_v repeated to its query heads), the
// log-probabilities stay (1e-10 in float64); the log says what each step did, and the default leaves the
// value biases where they are.
BOOST_AUTO_TEST_CASE(value_biases_fold_into_the_output_bias_on_grouped_query_heads) {
  nn::ModelShape s = shape(false);
  s.n_kv_heads = 2, s.positions = nn::PositionKind::rotary, s.attn_window = {0, 3};
  ag::Rng rng(4);
  nn::CausalLM<double> model(s, rng);
  perturb(model);
  analysis::ProcessingLog log;
  const auto processed = analysis::processed_weights(model, analysis::all_processing(), &log);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
  for (const auto& block : processed->blocks)
    for (double b : block->attn.wv.bias.to_vector()) BOOST_TEST(b == 0.0);
  BOOST_TEST((processed->blocks[0]->attn.wo.bias.to_vector() != model.blocks[0]->attn.wo.bias.to_vector()));
  BOOST_TEST_REQUIRE(log.size() == 4u);
  BOOST_TEST(log[3].first == "fold_value_biases");
  BOOST_TEST(log[3].second == "wv.bias folded into wo.bias");
  const auto by_default = analysis::processed_weights(model);
  BOOST_TEST(
      (by_default->blocks[0]->attn.wv.bias.to_vector() != processed->blocks[0]->attn.wv.bias.to_vector()));
  BOOST_TEST(worst_difference(model, *by_default, kIds, 2) <= 1e-10);
  // Without biases the step has nothing to fold and says so.
  s.bias = false;
  ag::Rng again(4);
  nn::CausalLM<double> plain(s, again);
  analysis::ProcessingLog none;
  (void)analysis::processed_weights(plain, analysis::all_processing(), &none);
  BOOST_TEST(none[3].second == "skipped: the model has no biases");
}

// Qwen2's attention (model.qkv_bias: q/k/v biases, no output bias) on RMSNorm, a gated MLP and grouped-query
// heads: the processed model gives the same log-probabilities, and the value biases stay where they are, as
// the log says (the output map has no bias to take them).
BOOST_AUTO_TEST_CASE(same_log_probs_with_qkv_biases_only) {
  nn::ModelShape s = shape(false);
  s.norm = nn::NormKind::rms, s.activation = nn::Activation::swiglu, s.bias = false, s.qkv_bias = true;
  s.n_kv_heads = 2;
  ag::Rng rng(4);
  nn::CausalLM<double> model(s, rng);
  perturb(model);
  BOOST_TEST_REQUIRE(model.blocks[0]->attn.wv.bias.defined());
  BOOST_TEST_REQUIRE(!model.blocks[0]->attn.wo.bias.defined());
  analysis::ProcessingLog log;
  const auto processed = analysis::processed_weights(model, analysis::all_processing(), &log);
  BOOST_TEST(worst_difference(model, *processed, kIds, 2) <= 1e-10);
  BOOST_TEST((processed->blocks[1]->attn.wv.bias.to_vector() == model.blocks[1]->attn.wv.bias.to_vector()));
  BOOST_TEST((processed->blocks[1]->attn.wq.bias.to_vector() == model.blocks[1]->attn.wq.bias.to_vector()));
  BOOST_TEST_REQUIRE(log.size() == 4u);
  BOOST_TEST(log[3].second.rfind("skipped: wo has no bias", 0) == 0);
}
