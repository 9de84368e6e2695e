// Head scores: numbers that say what pattern a head's attention map shows, computed from the maps (never
// assumed), and RUN/scores.json (docs/architecture.md "The run folder") with its fixed-width table.
// docs/head-scores.md gives each formula and its caveats. Not for ablation itself (that needs the model:
// study/ablation.h measures it and stores the result here) and not for drawing.
//
// Every score is a mean over query rows, pooled over maps: the sum over all counted rows of all maps divided
// by the number of counted rows (so a probe with more counted rows weighs more, and a probe with none does
// not dilute the mean). ScoreSum carries that (sum, rows) pair so callers can pool any set of maps.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "findings/attention_maps.h"

namespace findings {

struct ScoreSum {
  double sum = 0;    // summed per-row values
  int64_t rows = 0;  // rows counted
  void add(const ScoreSum& other) {
    sum += other.sum;
    rows += other.rows;
  }
  // sum / rows; NaN when no row counted (the score is undefined, not 0).
  double mean() const;
};

// (a) task: for each row i with a non-empty ideal_keys[i], the mass sum_{k in ideal_keys[i]} w[i][k]
//     (each distinct position once). ideal_keys has T entries; an empty entry skips that row.
ScoreSum task_mass(const AttentionWeights& w, const std::vector<std::vector<int>>& ideal_keys);
// (b) previous token: w[i][i-1] for every row i >= 1.
ScoreSum previous_token_mass(const AttentionWeights& w);
// (c) induction: for each row i whose token ids[i] occurred earlier, with j < i its most recent earlier
//     position, w[i][j+1] (the key right after the earlier occurrence). Rows without one are skipped.
ScoreSum induction_mass(const AttentionWeights& w, const std::vector<int>& ids);
// (d) first token: w[i][0] for every row i (row 0 included: it can only look at itself).
ScoreSum first_token_mass(const AttentionWeights& w);
// (e) duplicate token: for each row i whose token ids[i] occurred earlier, the mass sum_{j < i, ids[j] =
//     ids[i]} w[i][j] on every earlier position holding the same token (TransformerLens's duplicate-token
//     pattern, as `attograd detect --pattern duplicate` uses it). Rows without an earlier copy are skipped.
ScoreSum duplicate_token_mass(const AttentionWeights& w, const std::vector<int>& ids);

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

// Scores of every (layer, head) present in the probes, sorted by (layer, head).
//   probes: task, previous-token and first-token scores are pooled over these (e.g. held-out task inputs).
//   ideal_keys: empty (task score NaN), or one entry per probe, each empty (probe has no answer rows) or
//               T entries of ideal key positions per query row.
//   repeated_probes: the induction and duplicate-token scores are pooled over these (repeated random
//               sequences); with none, both are NaN.
// Throws std::invalid_argument when shapes disagree or a key position is outside [0, T).
std::vector<HeadScores> compute_head_scores(const std::vector<Probe>& probes,
                                            const std::vector<std::vector<std::vector<int>>>& ideal_keys,
                                            const std::vector<Probe>& repeated_probes);

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
