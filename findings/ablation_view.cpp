#include "findings/ablation_view.h"

#include <cstdio>

#include "findings/attention_maps.h"

namespace findings {

nlohmann::json mode_ablation_to_json(const ModeAblationResult& r) {
  nlohmann::json heads = nlohmann::json::array();
  for (const ModeAblation& h : r.heads)
    heads.push_back({{"layer", h.layer},
                     {"head", h.head},
                     {"position", h.position < 0 ? nlohmann::json(nullptr) : nlohmann::json(h.position)},
                     {"acc", h.acc},
                     {"loss", h.loss}});
  return {{"mode", r.mode},
          {"sequences", r.sequences},
          {"k", r.k},
          {"baseline", {{"acc", r.baseline_acc}, {"loss", r.baseline_loss}}},
          {"heads", heads}};
}

std::string mode_ablation_table(const ModeAblationResult& r) {
  std::string out;
  char line[256];
  std::snprintf(
      line, sizeof line,
      "baseline: exact match %.4f, loss %.4f\n\n  head   position  exact match    loss   loss change\n",
      r.baseline_acc, r.baseline_loss);
  out += line;
  for (const ModeAblation& h : r.heads) {
    std::snprintf(
        line, sizeof line, "  %-6s %8s  %11.4f  %7.4f  %+12.4f\n", head_name(h.layer, h.head).c_str(),
        h.position < 0 ? "all" : std::to_string(h.position).c_str(), h.acc, h.loss, h.loss - r.baseline_loss);
    out += line;
  }
  return out;
}

}  // namespace findings
