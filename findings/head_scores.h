// Head scores as plain data: what pattern a head's attention map shows, and RUN/scores.json
// (docs/architecture.md "The run folder") with its fixed-width table. The formulas that compute them from
// the maps live in analysis/head_scores.h; docs/head-scores.md gives each formula and its caveats. Not for
// ablation itself (that needs the model: analysis/ablation.h measures it and stores the result here) and
// not for drawing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace findings {

struct AblationResult {
  double zero_acc = 0;  // held-out exact-match accuracy with the head's output zeroed
  double mean_acc = 0;  // ... with it replaced by its mean over the held-out batch
  std::optional<double> zero_loss, mean_loss;
};

struct HeadScores {
  int layer = 0;
  int head = 0;
  // NaN when undefined (no counted rows, e.g. no task ideal keys); written as null in scores.json.
  // duplicate_token is NaN, too, when read from a scores.json written before it existed.
  double task = 0, previous_token = 0, induction = 0, first_token = 0, duplicate_token = 0;
  std::optional<AblationResult> ablation;
};

// When the run's patterns formed (findings/phase_change.h computes it): the step at which the best
// head's score first reached 0.5, interpolated between attention dumps (nullopt: never, or no history),
// and the step at which the held-out loss fell fastest.
struct PhaseChange {
  std::optional<double> induction, task, previous_token, eval_loss_fall;
};

struct HeadScoresFile {
  int64_t step = 0;
  std::vector<HeadScores> heads;  // sorted by (layer, head)
  // Only in a finished run's scores.json: "phase_change" and "wall_seconds" (training time of the run).
  std::optional<PhaseChange> phase_change = std::nullopt;
  std::optional<double> wall_seconds = std::nullopt;
};

nlohmann::json head_scores_to_json(const HeadScoresFile& scores);
// Validates: "step" integer >= 0, "heads" array of objects with integer "layer", "head" >= 0, and numbers
// (or null for NaN) "task", "previous_token", "induction", "first_token"; optional number or null
// "duplicate_token" (absent in files written before it existed: NaN); optional "ablation" object with
// numbers "zero_acc", "mean_acc" and optional "zero_loss", "mean_loss"; optional "phase_change" object of
// numbers or nulls ("induction", "task", "previous_token", "eval_loss_fastest_fall") and optional number
// "wall_seconds". Unknown keys are ignored.
// Errors: std::runtime_error "SOURCE: /json/pointer: expected ..., got ...".
HeadScoresFile head_scores_from_json(const nlohmann::json& j, const std::string& source);
HeadScoresFile read_head_scores(const std::string& path);
// Atomic; scores their reader would refuse throw instead, so no file read_head_scores rejects is written.
void write_head_scores(const std::string& path, const HeadScoresFile& scores);

// A fixed-width table, one line per head, ablation columns when any head has them; '-' for undefined.
// A '*' marks the most notable head of each column: the highest score, the lowest ablated accuracy,
// the highest ablated loss. For the end of training and `attograd ablate`.
std::string head_scores_table(const std::vector<HeadScores>& heads);

}  // namespace findings
