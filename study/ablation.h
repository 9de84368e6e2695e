// Head ablation for `attograd ablate`: a map can mislead, so measure each head's causal effect. For every
// layer and head, the held-out exact-match accuracy and loss with that head's output (before Wo) zeroed,
// and with it replaced by its mean over the held-out batch (mean ablation keeps the head's typical
// contribution and removes only what depends on the input). Both patch blocks.L.attn.z through activation
// hooks (nn/hooks.h); the model itself is never modified.
// Not for scores or files: head_scores.h stores the results, the cli writes them.
#pragma once

#include <vector>

#include "findings/head_scores.h"
#include "nn/transformer.h"
#include "train/evaluate.h"

namespace study {

// Every layer's z (blocks.L.attn.z: each head's output before Wo) averaged over the batch's sequences:
// [layer] -> (T, H, dk), T = batch.T. Runs the model without gradients in chunks of `chunk` sequences.
std::vector<ag::Tensor<float>> mean_head_outputs(const nn::CausalLM<float>& model, const train::Batch& batch,
                                                 int chunk = 256);

struct HeadAblation {
  int layer = 0, head = 0;
  train::EvalResult zeroed;  // head output set to 0
  train::EvalResult mean;    // head output set to its batch mean (mean_head_outputs)
};

struct AblationReport {
  train::EvalResult baseline;       // nothing patched
  std::vector<HeadAblation> heads;  // sorted by (layer, head)
};

// Baseline and, for each head in turn (one patched at a time), zero and mean ablation on `batch`.
AblationReport ablate_heads(const nn::CausalLM<float>& model, const train::Batch& batch, int chunk = 256);

// Sets `ablation` {zero_acc, mean_acc, zero_loss, mean_loss} on every head of `scores` that the report
// covers. Throws std::invalid_argument when a head of the report is missing from `scores`.
void merge_ablation(findings::HeadScoresFile& scores, const AblationReport& report);

}  // namespace study
