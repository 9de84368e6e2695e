#include "findings/eval_view.h"

#include <cstdio>

namespace findings {

nlohmann::json eval_to_json(const EvalReport& r) {
  nlohmann::json out{{"split", r.split}, {"eval_acc", r.acc}, {"eval_loss", r.loss}, {"n", r.n}};
  if (r.bits_per_token) out["bits_per_token"] = *r.bits_per_token;
  return out;
}

std::string eval_line(const EvalReport& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s exact match %.2f%% (%d sequences), loss %.4f",
                r.split == "heldout" ? "held-out" : "training", 100 * r.acc, r.n, r.loss);
  std::string line = buf;
  if (r.bits_per_token) {
    std::snprintf(buf, sizeof buf, ", %.4f bits per %s", *r.bits_per_token, r.unit.c_str());
    line += buf;
  }
  return line;
}

}  // namespace findings
