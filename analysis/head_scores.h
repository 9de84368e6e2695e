// Head-score formulas: numbers that say what pattern a head's attention map shows, computed from the maps
// (never assumed), pooled over probes into findings::HeadScores (findings/head_scores.h holds the data and
// scores.json). docs/head-scores.md gives each formula and its caveats.
//
// Every score is a mean over query rows, pooled over maps: the sum over all counted rows of all maps divided
// by the number of counted rows (so a probe with more counted rows weighs more, and a probe with none does
// not dilute the mean). ScoreSum carries that (sum, rows) pair so callers can pool any set of maps.
#pragma once

#include <cstdint>
#include <vector>

#include "findings/attention_maps.h"
#include "findings/head_scores.h"

namespace analysis {

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
ScoreSum task_mass(const findings::AttentionWeights& w, const std::vector<std::vector<int>>& ideal_keys);
// (b) previous token: w[i][i-1] for every row i >= 1.
ScoreSum previous_token_mass(const findings::AttentionWeights& w);
// (c) induction: for each row i whose token ids[i] occurred earlier, with j < i its most recent earlier
//     position, w[i][j+1] (the key right after the earlier occurrence). Rows without one are skipped.
ScoreSum induction_mass(const findings::AttentionWeights& w, const std::vector<int>& ids);
// (d) first token: w[i][0] for every row i (row 0 included: it can only look at itself).
ScoreSum first_token_mass(const findings::AttentionWeights& w);
// (e) duplicate token: for each row i whose token ids[i] occurred earlier, the mass sum_{j < i, ids[j] =
//     ids[i]} w[i][j] on every earlier position holding the same token (TransformerLens's duplicate-token
//     pattern, as `attograd detect --pattern duplicate` uses it). Rows without an earlier copy are skipped.
ScoreSum duplicate_token_mass(const findings::AttentionWeights& w, const std::vector<int>& ids);

// Scores of every (layer, head) present in the probes, sorted by (layer, head).
//   probes: task, previous-token and first-token scores are pooled over these (e.g. held-out task inputs).
//   ideal_keys: empty (task score NaN), or one entry per probe, each empty (probe has no answer rows) or
//               T entries of ideal key positions per query row.
//   repeated_probes: the induction and duplicate-token scores are pooled over these (repeated random
//               sequences); with none, both are NaN.
// Throws std::invalid_argument when shapes disagree or a key position is outside [0, T).
std::vector<findings::HeadScores> compute_head_scores(
    const std::vector<findings::Probe>& probes, const std::vector<std::vector<std::vector<int>>>& ideal_keys,
    const std::vector<findings::Probe>& repeated_probes);

}  // namespace analysis
