// Data-parallel forward and backward (train/batch_shards.h): the batch's gradients and mean loss whatever the
// number of shards (up to float rounding: the sums are added in another order), weighted by scored targets
// (a shard with few or none scored counts for less or nothing), the same bits for any thread count, and
// replicas that follow the model's weights from step to step.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "autograd/random.h"
#include "autograd/threads.h"
#include "train/batch_shards.h"

namespace {

const nn::ModelShape kShape{/*vocab=*/11,  /*max_len=*/9,           /*d_model=*/16,
                            /*n_heads=*/2, /*n_layers=*/2,
                            /*d_ff=*/32,   /*attention_only=*/false};

// B sequences of kShape.max_len random tokens; targets random, with `unscored` of them -1 at random.
train::Batch random_batch(int B, double unscored, uint64_t seed) {
  ag::Rng rng(seed);
  train::Batch batch;
  batch.B = B;
  batch.T = static_cast<int>(kShape.max_len);
  for (int i = 0; i < B * batch.T; ++i) {
    batch.inputs.push_back(static_cast<int32_t>(rng.uniform() * kShape.vocab));
    const int32_t target = static_cast<int32_t>(rng.uniform() * kShape.vocab);
    batch.targets.push_back(rng.uniform() < unscored ? -1 : target);
  }
  return batch;
}

struct Outcome {
  double loss = 0;
  std::vector<std::vector<float>> grads;
};

// One forward and backward of `batch` with `shards` shards on `threads` threads, from the model that
// seed 7 initialises (then `transform` applied to its weights).
template <typename Transform>
Outcome run(const train::Batch& batch, int shards, int threads, Transform transform, int repeats = 1,
            bool scored_rows_only = false) {
  ag::set_num_threads(threads);
  ag::Rng rng(7);
  nn::CausalLM<float> model(kShape, rng);
  train::BatchShards sharded(model, shards, scored_rows_only);
  Outcome out;
  for (int r = 0; r < repeats; ++r) {
    // Between repeats the weights change, as an optimiser step changes them: the replicas must follow.
    for (const auto& p : model.named_parameters()) transform(*p.tensor);
    out.loss = sharded.forward_backward(batch);
  }
  for (const auto& p : model.named_parameters())
    out.grads.emplace_back(p.tensor->grad(), p.tensor->grad() + p.tensor->numel());
  ag::set_num_threads(1);
  return out;
}

Outcome run(const train::Batch& batch, int shards, int threads = 1) {
  return run(batch, shards, threads, [](ag::Tensor<float>&) {});
}

// Largest |a - b| over every gradient, relative to the largest |a|.
double relative_difference(const Outcome& a, const Outcome& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.grads.size(); ++i)
    for (size_t j = 0; j < a.grads[i].size(); ++j) {
      diff = std::max(diff, double(std::fabs(a.grads[i][j] - b.grads[i][j])));
      scale = std::max(scale, double(std::fabs(a.grads[i][j])));
    }
  return diff / scale;
}

bool same_bits(const Outcome& a, const Outcome& b) {
  return a.loss == b.loss && a.grads == b.grads;
}

}  // namespace

BOOST_AUTO_TEST_CASE(shards_give_the_whole_batch_gradient) {
  // Even and uneven splits, 40% of the targets unscored at random, so the shards' counts differ.
  for (int B : {6, 7}) {
    const train::Batch batch = random_batch(B, 0.4, 100 + B);
    const Outcome whole = run(batch, 1);
    for (int shards : {2, 3, B}) {
      BOOST_TEST_CONTEXT("B " << B << ", shards " << shards) {
        const Outcome split = run(batch, shards);
        BOOST_TEST(std::fabs(split.loss - whole.loss) <= 1e-6 * whole.loss);
        BOOST_TEST(relative_difference(whole, split) <= 2e-6);
        BOOST_TEST(!same_bits(whole, split));  // a different order of sums: the check above is not vacuous
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(shards_weigh_by_scored_targets) {
  // Rows 0-2 (shard 0 of 2) have one scored target in ten, rows 3-5 all of theirs: an average of the
  // shards' means would weigh the first half's few targets as much as the second half's many.
  train::Batch batch = random_batch(6, 0.0, 5);
  ag::Rng rng(9);
  for (int i = 0; i < 3 * batch.T; ++i)
    if (rng.uniform() < 0.9) batch.targets[i] = -1;
  const Outcome whole = run(batch, 1), split = run(batch, 2);
  BOOST_TEST(std::fabs(split.loss - whole.loss) <= 1e-6 * whole.loss);
  BOOST_TEST(relative_difference(whole, split) <= 2e-6);
}

BOOST_AUTO_TEST_CASE(a_shard_with_nothing_scored_adds_nothing) {
  train::Batch batch = random_batch(6, 0.2, 11);
  for (int i = 3 * batch.T; i < 6 * batch.T; ++i) batch.targets[i] = -1;  // shard 1 of 2: all unscored
  const Outcome whole = run(batch, 1), split = run(batch, 2);
  BOOST_TEST(std::fabs(split.loss - whole.loss) <= 1e-6 * whole.loss);
  BOOST_TEST(relative_difference(whole, split) <= 2e-6);
  // Nothing scored at all: a loss of 0 and no gradient, as cross_entropy gives without shards.
  for (int32_t& t : batch.targets) t = -1;
  for (int shards : {1, 2}) {
    const Outcome none = run(batch, shards);
    BOOST_TEST(none.loss == 0.0);
    for (const auto& g : none.grads)
      for (float v : g) BOOST_TEST_REQUIRE(v == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(scored_rows_only_gives_the_same_loss_and_gradients) {
  // train.scored_rows_only: the last block's MLP and the unembedding on scored rows only.
  for (int shards : {1, 2}) {
    const train::Batch batch = random_batch(6, 0.7, 21);
    const Outcome all = run(batch, shards);
    const Outcome rows = run(
        batch, shards, 1, [](ag::Tensor<float>&) {}, 1, /*scored_rows_only=*/true);
    BOOST_TEST(rows.loss == all.loss, boost::test_tools::tolerance(1e-5));
    // A gradient that is zero in exact arithmetic (the key bias: softmax ignores a constant added to a
    // row's scores) is float rounding of sums of much larger terms, of the order of the model's largest
    // gradient times float's epsilon (1.2e-7): each parameter is held to 1e-5 of its own scale, or to
    // about 8 epsilons of the model's largest gradient where its own is that small.
    float model_scale = 0;
    for (const auto& g : all.grads)
      for (float v : g) model_scale = std::max(model_scale, std::fabs(v));
    for (size_t i = 0; i < all.grads.size(); ++i) {
      float scale = 0, diff = 0;
      for (size_t j = 0; j < all.grads[i].size(); ++j) {
        scale = std::max(scale, std::fabs(all.grads[i][j]));
        diff = std::max(diff, std::fabs(all.grads[i][j] - rows.grads[i][j]));
      }
      BOOST_TEST(diff <= std::max(1e-5f * scale, 1e-6f * model_scale),
                 "parameter " << i << ": " << diff << " of " << scale << " (model " << model_scale << ")");
    }
  }
}

BOOST_AUTO_TEST_CASE(same_bits_for_any_thread_count) {
  const train::Batch batch = random_batch(8, 0.3, 21);
  for (int shards : {1, 2, 3}) {
    BOOST_TEST_CONTEXT("shards " << shards) {
      const Outcome one = run(batch, shards, 1);
      for (int threads : {2, 3, 4}) BOOST_TEST(same_bits(one, run(batch, shards, threads)));
      // With the cores busy, the shards run one after another on the calling thread: the same bits.
      ag::detail::set_contention(ag::detail::Contention::kBusy);
      BOOST_TEST(same_bits(one, run(batch, shards, 2)));
      ag::detail::set_contention(ag::detail::Contention::kQuiet);
      BOOST_TEST(same_bits(one, run(batch, shards, 2)));
      ag::detail::set_contention(ag::detail::Contention::kMeasured);
    }
  }
}

BOOST_AUTO_TEST_CASE(replicas_follow_the_models_weights) {
  // Three passes with the weights scaled before each: the last pass's gradients must be those of the
  // scaled weights on every shard, not the replicas' first copy.
  const train::Batch batch = random_batch(6, 0.3, 31);
  auto scale = [](ag::Tensor<float>& w) { w.vec() *= 1.1f; };
  auto scale_thrice = [](ag::Tensor<float>& w) { w.vec() *= 1.1f * 1.1f * 1.1f; };
  for (int threads : {1, 2}) {
    const Outcome whole = run(batch, 1, threads, scale_thrice);
    const Outcome split = run(batch, 2, threads, scale, 3);
    BOOST_TEST(std::fabs(split.loss - whole.loss) <= 1e-5 * whole.loss);
    BOOST_TEST(relative_difference(whole, split) <= 1e-5);
  }
}
