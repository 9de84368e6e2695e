// Transcoders' findings as plain data: the evaluation of a run's per-layer transcoders (each reads an MLP's
// input and writes its output) as SAELens evaluates transcoders, its JSON (RUN/transcoders/eval.json and
// `attograd transcoder --json`) and its terminal table. Computing it is dictionary/transcoder.h's job.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

// One layer's transcoder on held-out tokens of the clean model: how well it predicts the MLP's output
// from the MLP's input.
struct TranscoderLayerEval {
  int layer = 0;
  std::string in_point, out_point;  // e.g. blocks.0.ln2.out and blocks.0.mlp.out
  int64_t d_in = 0, d_out = 0, d_sae = 0, dead = 0;
  bool skip = false;
  double mse = 0;                 // mean over tokens and dims of (y_hat - y)^2
  double explained_variance = 0;  // 1 - sum ||y - y_hat||^2 / sum ||y - mean(y)||^2
  double l0 = 0;                  // mean active features per token
};

// Every layer's, and the model's cross-entropy with every MLP replaced by its transcoder at once.
struct TranscoderEval {
  int64_t tokens = 0, steps = 0;
  bool cross_layer = false;  // one cross-layer transcoder: layer l's features write to every MLP output >= l
  std::vector<TranscoderLayerEval> layers;
  double ce_clean = 0, ce_replaced = 0, ce_zero_ablation = 0;
  double ce_loss_recovered = 0;  // (ce_zero_ablation - ce_replaced) / (ce_zero_ablation - ce_clean)
  double kl = 0;                 // mean over scored tokens of KL(clean || replaced)
};

nlohmann::json transcoder_eval_to_json(const TranscoderEval& e);
// One line per layer, then the cross-entropy line.
std::string transcoder_eval_table(const TranscoderEval& e);

}  // namespace findings
