// The forward and backward of a training step, data-parallel: the batch is split by rows into
// train.shards shards, and each shard runs forward, cross-entropy and backward on its own copy of the
// model, one shard per thread of the pool. Shard 0 runs on the model itself; the others on replicas whose
// weights are copied from it at the start of the step and whose gradients are added into the model's, in
// shard order, at the end.
//
// Why: at tiny and small widths the ops of a step are too short to split each over two threads (their
// joins and the operands written by the other core cost more than the second core gains), while a whole
// half batch per thread needs one join per step and keeps each shard's activations in its own core's cache
// (docs/performance.md has the measurements).
//
// The loss is the mean over the whole batch's scored targets, as without shards: shard s's mean is
// weighted by its share of the scored targets (its backward is seeded with that share), so every
// gradient is the same sum, added up in another order. Which thread runs a shard does not change its
// bits (every op gives the same bits on any thread count), and the shards are added in a fixed order, so
// the result depends on train.shards, never on the thread count. With one shard this is exactly the
// unsharded step (its backward seeded with 1).
#pragma once

#include <memory>
#include <vector>

#include "nn/transformer.h"
#include "train/tasks.h"

namespace train {

class BatchShards {
 public:
  // Builds shards - 1 replicas shaped like `model` (their weights are overwritten before each use). With
  // scored_rows_only, the loss reads nn::training_forward_rows on the scored positions
  // (train.scored_rows_only).
  BatchShards(nn::CausalLM<float>& model, int shards, bool scored_rows_only = false);

  // Clears the model's gradients, runs every shard's forward and backward, and leaves the whole batch's
  // gradients in the model's parameters. Returns the batch's mean loss; if a shard's loss is NaN or Inf,
  // returns it without finishing the backward (the caller stops the step before the update).
  double forward_backward(const Batch& batch);

  int shards() const { return static_cast<int>(replicas_.size()) + 1; }

 private:
  // Shard s's forward and backward (on the model or its replica), its loss weighted by `weight`; returns
  // its unweighted mean loss. Runs on whichever thread claims shard s.
  double run_shard(int s, const Batch& batch, double weight);
  void add_replica_gradients();

  nn::CausalLM<float>& model_;
  bool scored_rows_only_;
  std::vector<std::unique_ptr<nn::CausalLM<float>>> replicas_;
  std::vector<std::vector<ag::Tensor<float>*>>
      params_;  // [shard][i]: shard 0 the model's, then each replica's
};

}  // namespace train
