#include "train/batch_shards.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/threads.h"
#include "nn/training_forward.h"

namespace train {

namespace {

// Shard s of S holds the batch's rows [B*s/S, B*(s+1)/S).
int first_row(int s, int shards, int batch_rows) {
  return static_cast<int>(int64_t(batch_rows) * s / shards);
}

int64_t scored_targets(const Batch& batch, int row_begin, int row_end) {
  const auto begin = batch.targets.begin() + int64_t(row_begin) * batch.T;
  const auto end = batch.targets.begin() + int64_t(row_end) * batch.T;
  return std::count_if(begin, end, [](int32_t t) { return t != -1; });
}

}  // namespace

BatchShards::BatchShards(nn::CausalLM<float>& model, int shards, bool scored_rows_only)
    : model_(model), scored_rows_only_(scored_rows_only) {
  ag::Rng unused(0);  // the replicas' initial weights are never read
  for (int s = 1; s < shards; ++s)
    replicas_.push_back(std::make_unique<nn::CausalLM<float>>(model.shape, unused));
  for (int s = 0; s < shards; ++s) {
    params_.emplace_back();
    for (const auto& p : (s == 0 ? model_ : *replicas_[s - 1]).named_parameters())
      params_.back().push_back(p.tensor);
  }
}

double BatchShards::run_shard(int s, const Batch& batch, double weight) {
  nn::CausalLM<float>& model = s == 0 ? model_ : *replicas_[s - 1];
  // Copied here, by the thread that runs the shard, so its weights and gradients live in its core's cache.
  for (size_t i = 0; s > 0 && i < params_[s].size(); ++i)
    std::copy_n(params_[0][i]->data(), params_[s][i]->numel(), params_[s][i]->data());
  for (ag::Tensor<float>* p : params_[s]) p->zero_grad();
  const int b0 = first_row(s, shards(), batch.B), b1 = first_row(s + 1, shards(), batch.B);
  const int64_t t0 = int64_t(b0) * batch.T, t1 = int64_t(b1) * batch.T;
  const std::vector<int32_t> inputs(batch.inputs.begin() + t0, batch.inputs.begin() + t1);
  const std::vector<int32_t> targets(batch.targets.begin() + t0, batch.targets.begin() + t1);
  ag::Tensor<float> loss;
  if (scored_rows_only_) {
    std::vector<int64_t> rows;
    std::vector<int32_t> picked;
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i] != -1) rows.push_back(static_cast<int64_t>(i)), picked.push_back(targets[i]);
    if (!rows.empty())
      loss = ag::cross_entropy(nn::training_forward_rows(model, inputs, b1 - b0, batch.T, rows), picked, -1);
  }
  if (!loss.defined()) {
    loss = ag::cross_entropy(model.forward(inputs, b1 - b0, batch.T), targets, -1);
  }
  const double value = loss.item();
  if (!std::isfinite(value)) return value;
  const float seed = static_cast<float>(weight);
  loss.backward(&seed, 1);
  return value;
}

double BatchShards::forward_backward(const Batch& batch) {
  const int S = shards();
  std::vector<int64_t> scored(S);
  int64_t total = 0;
  for (int s = 0; s < S; ++s)
    total += scored[s] = scored_targets(batch, first_row(s, S, batch.B), first_row(s + 1, S, batch.B));
  if (total == 0) {  // nothing scored: a loss of 0 and no gradient, as cross_entropy gives unsharded
    for (ag::Tensor<float>* p : params_[0]) p->zero_grad();
    return 0.0;
  }

  std::vector<double> losses(S, 0.0);
  std::vector<std::exception_ptr> errors(S);
  ag::parallel_tasks(S, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      if (scored[s] == 0) {  // nothing to learn from: no gradient
        for (ag::Tensor<float>* p : params_[s]) p->zero_grad();
        continue;
      }
      try {
        losses[s] = run_shard(static_cast<int>(s), batch, double(scored[s]) / double(total));
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  double loss = 0;
  for (int s = 0; s < S; ++s) loss += losses[s] * double(scored[s]) / double(total);
  if (std::isfinite(loss) && S > 1) add_replica_gradients();
  return loss;
}

void BatchShards::add_replica_gradients() {
  int64_t elements = 0;
  for (const ag::Tensor<float>* p : params_[0]) elements += p->numel();
  // Each parameter's sum is made by one thread, shard by shard in order: the same bits on any thread count.
  const int64_t count = static_cast<int64_t>(params_[0].size());
  ag::parallel_for(count, elements * int64_t(replicas_.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ag::Tensor<float>& into = *params_[0][i];
      for (size_t s = 1; s < params_.size(); ++s) {
        ag::Tensor<float>& from = *params_[s][i];
        if (from.has_grad())
          ag::VecMap<float>(into.grad(), into.numel()) += ag::VecMap<float>(from.grad(), from.numel());
      }
    }
  });
}

}  // namespace train
