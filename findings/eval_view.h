// What `attograd eval` reports as plain data: exact-match accuracy and loss of a run's checkpoint on its
// held-out sequences or a finite dataset's training sequences; its JSON (`eval --json`, Run.eval()):
//   {"split": "heldout" or "train", "eval_acc": x, "eval_loss": y, "n": N[, "bits_per_token": b]}
// bits_per_token only for a text model (bits per character or byte, the unit text models report).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace findings {

struct EvalReport {
  std::string split = "heldout";
  double acc = 0, loss = 0;
  int n = 0;
  std::optional<double> bits_per_token;  // text models only
  std::string unit = "character";        // what a token is, for the table: "character" or "byte"
};

nlohmann::json eval_to_json(const EvalReport& r);
// "held-out exact match 97.27% (512 sequences), loss 0.0812[, 1.9 bits per character]".
std::string eval_line(const EvalReport& r);

}  // namespace findings
