// Head ablation for `attograd ablate`: a map can mislead, so measure each head's causal effect. For every
// layer and head, the held-out exact-match accuracy and loss with that head's output (before Wo) zeroed,
// and with it replaced by its mean over the held-out batch (mean ablation keeps the head's typical
// contribution and removes only what depends on the input). Uses MultiHeadAttention's study hooks
// (keep_head_outputs, patches) and always leaves them off and empty, also when it throws.
// Not for scores or files: head_scores.h stores the results, the cli writes them.
#pragma once

#include <vector>

#include "train/evaluate.h"
#include "train/head_scores.h"

namespace ag {

// Every head's output averaged over the batch's sequences: [layer][head] -> (T, dk), T = batch.T.
// Runs the model without gradients in chunks of `chunk` sequences.
std::vector<std::vector<Tensor<float>>> mean_head_outputs(nn::CausalLM<float>& model, const Batch& batch,
                                                          int chunk = 256);

struct HeadAblation {
  int layer = 0, head = 0;
  EvalResult zeroed;  // head output set to 0
  EvalResult mean;    // head output set to its batch mean (mean_head_outputs)
};

struct AblationReport {
  EvalResult baseline;              // nothing patched
  std::vector<HeadAblation> heads;  // sorted by (layer, head)
};

// Baseline and, for each head in turn (one patched at a time), zero and mean ablation on `batch`.
AblationReport ablate_heads(nn::CausalLM<float>& model, const Batch& batch, int chunk = 256);

// Sets `ablation` {zero_acc, mean_acc, zero_loss, mean_loss} on every head of `scores` that the report
// covers. Throws std::invalid_argument when a head of the report is missing from `scores`.
void merge_ablation(HeadScoresFile& scores, const AblationReport& report);

// Clears every MultiHeadAttention's patches and keep_head_outputs when it goes out of scope.
class HeadPatchGuard {
 public:
  explicit HeadPatchGuard(nn::CausalLM<float>& model) : model_(model) {}
  ~HeadPatchGuard();
  HeadPatchGuard(const HeadPatchGuard&) = delete;
  HeadPatchGuard& operator=(const HeadPatchGuard&) = delete;

 private:
  nn::CausalLM<float>& model_;
};

}  // namespace ag
