// RUN/report.html: one self-contained page (inline CSS, JS and SVG; nothing fetched from the network) to
// study a run. Its sections, in order, with a navigation bar: the attention viewer (every head as a
// thumbnail, one enlarged with its query row and key column highlighted under the pointer, the probe's
// tokens coloured by where the selected token attends; a slider over the dumped steps), the loss and
// accuracy curves, head scores over training, the final score table, and the circuits, patching, lens,
// Fourier and sparse-autoencoder results when the run has them. The sections are one table in
// report_html.cpp (kSections).
// The dumps travel compactly in a <script type="application/json"> tag: each map's lower triangle as
// one byte per weight, base64 (attention_maps.h's lower_triangle_base64); report.js decodes the chosen
// step and recolours the drawn cells in place, so the induction config's 51 dumps stay under 3 MB.
// Not for computing anything: scores come from head_scores, pictures' colours from svg_heatmap.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "findings/attention_maps.h"
#include "findings/circuits_view.h"
#include "findings/fourier_view.h"
#include "findings/graph_view.h"
#include "findings/head_scores.h"
#include "findings/lens_view.h"
#include "findings/patching_view.h"
#include "findings/sae_view.h"

namespace findings {

// The numbers of one metrics.jsonl record the page draws (analysis/run_study.cpp fills them from the log).
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
  // Scores at each dumped step, for the "scores over training" charts. score_history_from_dumps: they were
  // computed from the dumps alone (analysis::compute_head_scores, when the run recorded none):
  // previous-token, first-token, and induction over each probe's own repeated tokens (no task score, since
  // the ideal keys belong to the task); the page says which it shows.
  std::vector<HeadScoresFile> score_history;
  bool score_history_from_dumps = false;
  std::optional<CircuitsResult> circuits;   // RUN/circuits.json, when written
  std::vector<PatchingResult> patchings;    // RUN/patching/*.json, by name
  std::vector<std::string> patching_names;  // the files' stems, one per patching
  std::vector<LensResult> lenses;           // RUN/lens/*.json, by name
  std::vector<std::string> lens_names;      // the files' stems, one per lens
  // A modular-addition run's Fourier analysis: RUN/fourier/fourier.json and its pictures' SVG text
  // (spectra, neurons, logits), and RUN/measures.jsonl in step order.
  std::optional<FourierReport> fourier;
  std::vector<std::string> fourier_svgs;
  std::vector<FourierMeasures> measures;
  // The SAEs trained on the run: each RUN/sae/POINT/eval.json, by folder name, and its features.html's
  // path relative to the run folder, one per SAE (empty when the page is missing).
  std::vector<SaeEvalSummary> saes;
  std::vector<std::string> sae_pages;
  // The attribution graphs saved in the run (RUN/graphs/NAME/, by name), each with its viewer's path.
  std::vector<GraphSummary> graphs;
  // The run's transcoders: RUN/transcoders/eval.json (null when absent) and each evaluated layer's
  // features.html relative to the run folder (empty when the page is missing), in eval.json's order.
  nlohmann::json transcoders;
  std::vector<std::string> transcoder_pages;
};

std::string report_html(const ReportInputs& inputs);
void write_report_html(const std::string& path, const ReportInputs& inputs);  // atomic

}  // namespace findings
