// RUN/report.html: one self-contained page (inline CSS, JS and SVG; nothing fetched from the network) to
// study a run: loss and accuracy curves, head scores over training and at the end, and the attention grid
// at every dumped step with a slider and a probe selector, so a reader can watch a pattern form.
// The dumps travel as JSON in a <script type="application/json"> tag (weights rounded to 1e-3) and a small
// script draws the selected step as SVG, so ten dumps of 4 probes x 8 heads x T=17 stay well under 1 MB.
// Not for computing anything: scores come from head_scores, pictures' colours from svg_heatmap.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "findings/attention_maps.h"
#include "findings/circuits_view.h"
#include "findings/head_scores.h"
#include "findings/lens_view.h"
#include "findings/patching_view.h"

namespace findings {

// The numbers of one metrics.jsonl record the page draws (the study layer fills them from the log).
struct ReportMetrics {
  int64_t step = 0;
  double loss = 0, tokens_per_s = 0;
  std::optional<double> eval_loss, eval_acc;
};

struct ReportInputs {
  std::string title;                   // e.g. the config's name; "attograd run" when empty
  std::vector<ReportMetrics> metrics;  // in step order
  HeadScoresFile scores;               // the final head scores (and ablation, when measured)
  std::vector<AttentionDump> dumps;    // one per dumped step, in step order
  // Scores at each dumped step, for the "scores over training" charts. When empty, the report computes
  // them from the dumps alone: previous-token, first-token, and induction over each probe's own repeated
  // tokens (no task score, since the ideal keys belong to the task); the page says which it shows.
  std::vector<HeadScoresFile> score_history;
  std::optional<CircuitsResult> circuits;   // RUN/circuits.json, when written
  std::vector<PatchingResult> patchings;    // RUN/patching/*.json, by name
  std::vector<std::string> patching_names;  // the files' stems, one per patching
  std::vector<LensResult> lenses;           // RUN/lens/*.json, by name
  std::vector<std::string> lens_names;      // the files' stems, one per lens
};

std::string report_html(const ReportInputs& inputs);
void write_report_html(const std::string& path, const ReportInputs& inputs);  // atomic

}  // namespace findings
