// What `attograd ablate --mode M` finds, as plain data: the baseline and each head's (or each head and
// position's) held-out accuracy and loss with that head ablated one way, its JSON and its table.
// analysis/ablation.h computes it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct ModeAblation {
  int layer = 0, head = 0;
  int position = -1;  // -1: every position
  double acc = 0, loss = 0;
};

struct ModeAblationResult {
  std::string mode;  // "zero", "mean" or "resample"
  int sequences = 0;
  int k = 1;  // resample draws averaged over; 1 for the other modes
  double baseline_acc = 0, baseline_loss = 0;
  std::vector<ModeAblation> heads;  // by (layer, head, position), position -1 first
};

// {"mode", "sequences", "k", "baseline": {"acc", "loss"}, "heads": [{"layer", "head", "position" (null:
// every position), "acc", "loss"}]}.
nlohmann::json mode_ablation_to_json(const ModeAblationResult& r);

// The header line after `title`, the baseline and one line per head (and position) with its loss change.
std::string mode_ablation_table(const ModeAblationResult& r);

}  // namespace findings
