// Head ablation through the C++ API on small random models, where the right answer is known: zeroing a
// head whose Wo columns are zero changes nothing, zeroing one that feeds Wo changes the logits, and
// mean-ablating a head with its own mean over a batch of one sequence leaves the logits as they were
// (while the mean over two different sequences does not); the single modes (ablate --mode) give the same
// numbers as ablate_heads for zero and mean, resampling from identical sequences changes nothing and from
// different ones something, the same seed gives the same draws, and per-position entries cover every
// position. Resampling streams its draws and gives, bit for bit, what keeping every draw gave.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <utility>

#include "analysis/ablation.h"

namespace {

nn::ModelShape tiny_shape() {
  nn::ModelShape s;
  s.vocab = 7;
  s.max_len = 6;
  s.d_model = 8;
  s.n_heads = 2;
  s.n_layers = 2;
  s.d_ff = 16;
  return s;
}

ag::Tensor<float> logits_of(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids, int B, int T,
                            nn::Hooks<float>* hooks = nullptr) {
  ag::NoGradScope no_grad;
  return model.forward(ids, B, T, {}, hooks);
}

// The (T, H, dk) mean z of one layer, restricted to head h as (T, dk).
std::vector<float> head_slice(const ag::Tensor<float>& z, int h) {
  const int64_t T = z.size(0), H = z.size(1), dk = z.size(2);
  std::vector<float> out;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < dk; ++k) out.push_back(z.data()[(t * H + h) * dk + k]);
  return out;
}

float max_abs_diff(const ag::Tensor<float>& a, const ag::Tensor<float>& b) {
  BOOST_TEST_REQUIRE(a.numel() == b.numel());
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.data()[i] - b.data()[i]));
  return m;
}

const std::vector<int32_t> kSeq = {0, 3, 5, 2, 6, 4};
const std::vector<int32_t> kOther = {0, 6, 2, 2, 1, 5};

}  // namespace

BOOST_AUTO_TEST_SUITE(head_ablation)

BOOST_AUTO_TEST_CASE(zeroing_a_head_changes_the_output_only_when_wo_reads_it) {
  ag::Rng rng(7);
  nn::CausalLM<float> model(tiny_shape(), rng);
  auto& attn = model.blocks[0]->attn;
  // Head 1 of layer 0 feeds nothing: Wo's input columns [dk, 2 dk) are zero.
  float* wo = attn.wo.weight.data();
  for (int64_t r = 0; r < attn.d_model; ++r)
    for (int64_t c = attn.dk; c < 2 * attn.dk; ++c) wo[r * attn.d_model + c] = 0;
  nn::Hooks<float> none;  // the reference forward, as the patched runs
  const ag::Tensor<float> base = logits_of(model, kSeq, 1, 6, &none);

  const ag::Tensor<float> zeros = ag::Tensor<float>::zeros({6, 2, 4});  // (T, H, dk)
  nn::Hooks<float> h0, h1;
  h0.patch_head("blocks.0.attn.z", 0, {}, zeros);
  h1.patch_head("blocks.0.attn.z", 1, {}, zeros);
  const ag::Tensor<float> zero0 = logits_of(model, kSeq, 1, 6, &h0);
  const ag::Tensor<float> zero1 = logits_of(model, kSeq, 1, 6, &h1);

  BOOST_TEST(max_abs_diff(base, zero0) > 1e-3f);
  BOOST_TEST(max_abs_diff(base, zero1) == 0.0f);  // Wo's zero columns ignore the zeroed head
}

BOOST_AUTO_TEST_CASE(mean_ablation_with_the_heads_own_mean_over_one_sequence_changes_nothing) {
  ag::Rng rng(11);
  nn::CausalLM<float> model(tiny_shape(), rng);
  train::Batch one{1, 6, kSeq, std::vector<int32_t>(6, -1), {}};
  nn::Hooks<float> none;  // the reference forward, as the patched runs
  const ag::Tensor<float> base = logits_of(model, kSeq, 1, 6, &none);
  const auto means = analysis::mean_head_outputs(model, one);
  BOOST_TEST_REQUIRE(means.size() == 2u);
  for (size_t l = 0; l < 2; ++l) {
    BOOST_TEST((means[l].shape() == ag::Shape{6, 2, 4}));
    for (int h = 0; h < 2; ++h) {
      nn::Hooks<float> hooks;
      hooks.patch_head(nn::hook_name(nn::Point::attn_z, l), h, {}, means[l]);
      BOOST_TEST(max_abs_diff(base, logits_of(model, kSeq, 1, 6, &hooks)) == 0.0f,
                 "layer " << l << " head " << h);
    }
  }

  // The mean over two different sequences is not the first one's own output: the check above can fail.
  train::Batch two{2, 6, kSeq, std::vector<int32_t>(12, -1), {}};
  two.inputs.insert(two.inputs.end(), kOther.begin(), kOther.end());
  const auto mixed = analysis::mean_head_outputs(model, two);
  nn::Hooks<float> mixed_hooks;
  mixed_hooks.patch_head("blocks.0.attn.z", 0, {}, mixed[0]);
  BOOST_TEST(max_abs_diff(base, logits_of(model, kSeq, 1, 6, &mixed_hooks)) > 1e-4f);

  // And it is the average of the two sequences' own means.
  train::Batch other{1, 6, kOther, std::vector<int32_t>(6, -1), {}};
  const auto own_other = analysis::mean_head_outputs(model, other);
  const std::vector<float> m = head_slice(mixed[1], 1), a = head_slice(means[1], 1),
                           b = head_slice(own_other[1], 1);
  for (size_t i = 0; i < m.size(); ++i)
    BOOST_TEST(m[i] == 0.5f * (a[i] + b[i]), boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(ablate_heads_reports_every_head_and_leaves_the_model_as_it_was) {
  ag::Rng rng(3);
  nn::CausalLM<float> model(tiny_shape(), rng);
  train::Batch batch{2, 6, kSeq, {}, {}};
  batch.inputs.insert(batch.inputs.end(), kOther.begin(), kOther.end());
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 6; ++t) batch.targets.push_back(t >= 3 && t < 5 ? batch.inputs[b * 6 + t + 1] : -1);
  const train::EvalResult before = train::evaluate(model, batch);
  const analysis::AblationReport report = analysis::ablate_heads(model, batch, /*chunk=*/1);
  BOOST_TEST(report.baseline.loss == before.loss, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(report.heads.size() == 4u);
  for (const analysis::HeadAblation& a : report.heads) {
    BOOST_TEST((a.zeroed.acc >= 0 && a.zeroed.acc <= 1));
    BOOST_TEST(a.zeroed.loss != before.loss);  // every head of a random model feeds Wo
  }
  BOOST_TEST(train::evaluate(model, batch).loss == before.loss);

  findings::HeadScoresFile scores;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      scores.heads.push_back(findings::HeadScores{l, h, 0, 0, 0, 0, 0, std::nullopt});
  analysis::merge_ablation(scores, report);
  for (const findings::HeadScores& h : scores.heads) {
    BOOST_TEST_REQUIRE(h.ablation.has_value());
    BOOST_TEST(*h.ablation->zero_loss == report.heads[h.layer * 2 + h.head].zeroed.loss);
  }
  scores.heads.pop_back();
  BOOST_CHECK_THROW(analysis::merge_ablation(scores, report), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(single_modes_agree_with_ablate_heads_and_resample_as_defined) {
  ag::Rng rng(3);
  nn::CausalLM<float> model(tiny_shape(), rng);
  auto batch_of = [](const std::vector<std::vector<int32_t>>& seqs) {
    train::Batch b{static_cast<int>(seqs.size()), 6, {}, {}, {}};
    for (const auto& s : seqs) {
      b.inputs.insert(b.inputs.end(), s.begin(), s.end());
      for (int t = 0; t < 6; ++t) b.targets.push_back(t >= 2 && t < 5 ? s[t + 1] : -1);
    }
    return b;
  };
  const train::Batch mixed = batch_of({kSeq, kOther, kSeq, kOther});
  const analysis::AblationReport both = analysis::ablate_heads(model, mixed);
  const analysis::ModeAblationReport zero =
      analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::zero, false);
  const analysis::ModeAblationReport mean =
      analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::mean, false);
  BOOST_TEST_REQUIRE(zero.heads.size() == 4u);
  for (size_t i = 0; i < 4; ++i) {
    BOOST_TEST(zero.heads[i].loss == both.heads[i].zeroed.loss, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(mean.heads[i].loss == both.heads[i].mean.loss, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(zero.heads[i].position == -1);
  }
  // Resampling among identical sequences puts each head's own z back: nothing changes.
  const train::Batch same = batch_of({kSeq, kSeq, kSeq});
  const analysis::ModeAblationReport own =
      analysis::ablate_heads_mode(model, same, analysis::AblationMode::resample, false, 3);
  for (const analysis::ModeAblation& h : own.heads)
    BOOST_TEST(h.loss == own.baseline.loss, boost::test_tools::tolerance(1e-6));
  // Among different sequences it does, and the same seed draws the same permutations.
  const analysis::ModeAblationReport r1 =
      analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::resample, false, 3, 9);
  const analysis::ModeAblationReport r2 =
      analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::resample, false, 3, 9);
  double moved = 0;
  for (size_t i = 0; i < r1.heads.size(); ++i) {
    BOOST_TEST(r1.heads[i].loss == r2.heads[i].loss);
    moved = std::max(moved, std::fabs(r1.heads[i].loss - r1.baseline.loss));
  }
  BOOST_TEST(moved > 1e-4);
  // Per position: each head at every position alone, after the head at all positions.
  const analysis::ModeAblationReport per =
      analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::zero, true);
  BOOST_TEST(per.heads.size() == 4u * 7u);
  BOOST_TEST(per.heads[0].position == -1);
  BOOST_TEST(per.heads[6].position == 5);
  // One position alone is not the head at every position.
  BOOST_TEST(per.heads[1].loss != per.heads[0].loss);
  BOOST_CHECK_THROW(
      analysis::ablate_heads_mode(model, batch_of({kSeq}), analysis::AblationMode::resample, false),
      std::invalid_argument);
  BOOST_CHECK_THROW(analysis::ablate_heads_mode(model, mixed, analysis::AblationMode::resample, false, 0),
                    std::invalid_argument);
}

// Resample ablation as it was before draws were streamed: every draw made and kept first, then each
// (layer, head, position) evaluated over the kept draws in order.
std::vector<analysis::ModeAblation> resample_keeping_draws(const nn::CausalLM<float>& model,
                                                           const train::Batch& batch, bool per_position,
                                                           int k, uint64_t seed) {
  const int B = batch.B, T = batch.T;
  const size_t L = model.blocks.size();
  nn::Hooks<float> cache;
  for (size_t l = 0; l < L; ++l) cache.capture(nn::hook_name(nn::Point::attn_z, l));
  {
    ag::NoGradScope no_grad;
    model.forward(batch.inputs, B, T, {}, &cache);
  }
  std::vector<std::vector<ag::Tensor<float>>> draws(L);
  ag::Rng rng(seed);
  for (int r = 0; r < k; ++r) {
    std::vector<int> perm(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) perm[b] = b;
    for (int b = B - 1; b > 0; --b)
      std::swap(perm[b], perm[static_cast<int>(rng.uniform() * (b + 1)) % (b + 1)]);
    for (int b = 0; b < B; ++b)
      if (perm[b] == b) std::swap(perm[b], perm[(b + 1) % B]);
    for (size_t l = 0; l < L; ++l) {
      const ag::Tensor<float>& z = cache.captured(nn::hook_name(nn::Point::attn_z, l));
      const int64_t per = z.numel() / B;
      std::vector<float> v(static_cast<size_t>(z.numel()));
      for (int b = 0; b < B; ++b)
        std::copy(z.data() + perm[b] * per, z.data() + (perm[b] + 1) * per, v.begin() + b * per);
      draws[l].push_back(ag::Tensor<float>::from(z.shape(), std::move(v)));
    }
  }
  std::vector<analysis::ModeAblation> heads;
  for (size_t l = 0; l < L; ++l)
    for (int h = 0; h < static_cast<int>(model.blocks[l]->attn.n_heads); ++h)
      for (int pos = -1; pos < (per_position ? T : 0); ++pos) {
        analysis::ModeAblation a;
        a.layer = static_cast<int>(l);
        a.head = h;
        a.position = pos;
        for (int r = 0; r < k; ++r) {
          nn::Hooks<float> hooks;
          hooks.patch_head(nn::hook_name(nn::Point::attn_z, l), h,
                           pos < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{pos}, draws[l][r]);
          const train::EvalResult e = train::evaluate(model, batch, B, &hooks);
          a.acc += e.acc / k;
          a.loss += e.loss / k;
        }
        heads.push_back(a);
      }
  return heads;
}

BOOST_AUTO_TEST_CASE(resample_streams_its_draws_with_the_same_bits_as_keeping_them) {
  ag::Rng rng(5);
  nn::CausalLM<float> model(tiny_shape(), rng);
  train::Batch batch{5, 6, {}, {}, {}};
  ag::Rng data(11);
  for (int b = 0; b < 5; ++b)
    for (int t = 0; t < 6; ++t) {
      batch.inputs.push_back(t == 0 ? 0 : 1 + static_cast<int32_t>(data.uniform() * 6) % 6);
      batch.targets.push_back(t >= 2 ? batch.inputs.back() : -1);
    }
  for (const bool per_position : {false, true})
    for (const int k : {1, 3, 7}) {
      const analysis::ModeAblationReport r =
          analysis::ablate_heads_mode(model, batch, analysis::AblationMode::resample, per_position, k, 21);
      const std::vector<analysis::ModeAblation> want =
          resample_keeping_draws(model, batch, per_position, k, 21);
      BOOST_TEST_REQUIRE(r.heads.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        BOOST_TEST(r.heads[i].position == want[i].position);
        BOOST_TEST(r.heads[i].acc == want[i].acc);  // exactly: the same sums in the same order
        BOOST_TEST(r.heads[i].loss == want[i].loss);
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()
