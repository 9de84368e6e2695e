// Head ablation for `attograd ablate`: a map can mislead, so measure each head's causal effect. For every
// layer and head, the held-out exact-match accuracy and loss with that head's output (before Wo) zeroed,
// and with it replaced by its mean over the held-out batch (mean ablation keeps the head's typical
// contribution and removes only what depends on the input). Both patch blocks.L.attn.z through activation
// hooks (nn/hooks.h); the model itself is never modified.
// ablate() and ablate_scores() are the tool (`attograd ablate` and Run.ablate in Python): the request
// checked, the held-out set made, and for ablate_scores RUN/scores.json and report.html written.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/ablation_view.h"
#include "findings/head_scores.h"
#include "nn/transformer.h"
#include "train/evaluate.h"

namespace analysis {

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

// One ablation mode on its own (`attograd ablate --mode`): each head's z replaced by
//   zero      0;
//   mean      its mean over the batch (mean_head_outputs);
//   resample  the same head's z from another sequence of the batch (a seeded random permutation without
//             fixed points), the loss and accuracy averaged over `k` such draws;
// at every position, or (per_position) at one position at a time. Resample draws are made and evaluated
// one at a time (running sums per head), so memory does not grow with k.
enum class AblationMode { zero, mean, resample };

using findings::ModeAblation;

struct ModeAblationReport {
  train::EvalResult baseline;
  std::vector<ModeAblation> heads;  // by (layer, head, position), position -1 first
};

// Throws std::invalid_argument when k < 1 for resample or the batch has fewer than 2 sequences for it.
ModeAblationReport ablate_heads_mode(const nn::CausalLM<float>& model, const train::Batch& batch,
                                     AblationMode mode, bool per_position, int k = 4, uint64_t seed = 1);

// The mode's name ("zero", "mean", "resample") and back; parse throws std::invalid_argument naming
// `argument` and the three names.
const char* ablation_mode_name(AblationMode mode);
AblationMode parse_ablation_mode(const std::string& name, const std::string& argument);

// Sets `ablation` {zero_acc, mean_acc, zero_loss, mean_loss} on every head of `scores` that the report
// covers. Throws std::invalid_argument when a head of the report is missing from `scores`.
void merge_ablation(findings::HeadScoresFile& scores, const AblationReport& report);

// The tool: one mode on `n` held-out sequences (0 = train.eval_size), the same stream as training's
// evaluations so the baseline agrees with metrics.jsonl.
struct AblateRequest {
  std::string mode = "zero";  // zero, mean or resample
  int n = 0;                  // held-out sequences; 0 = train.eval_size
  bool per_position = false;  // also each head at each position alone
  int k = 4;                  // resample: draws to average over
  uint64_t seed = 1;          // resample: the draws' seed
  // The user's sequences instead of the held-out set (analysis::sequences_batch: whole sequences, scored at
  // the task's positions); n is then not given.
  std::vector<Sequence> ids;
};

Output<findings::ModeAblationResult> ablate(StudyRun& run, const AblateRequest& request);

// Zero and mean ablation of every head on `n` held-out sequences (0 = train.eval_size), merged into the
// run's head scores (RUN/scores.json when it describes this checkpoint, else recomputed, said in a note),
// written back to RUN/scores.json with report.html rebuilt, under the run's lock. Returns the scores with
// their "ablation" objects and the baseline in `baseline`.
struct AblationScores {
  findings::HeadScoresFile scores;
  int sequences = 0;
  double baseline_acc = 0, baseline_loss = 0;
};
Output<AblationScores> ablate_scores(StudyRun& run, int n = 0);

}  // namespace analysis
