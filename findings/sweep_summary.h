// The summary of a sweep (docs/sweeps.md): one row per run with its settings, final losses and accuracy,
// time, best head per score and phase-change steps, and the files made of it: OUT/summary.json,
// OUT/summary.csv and OUT/index.html (one self-contained page: a sortable table linking every run's
// report.html, accuracy and phase-change steps per setting with every seed as a dot, and the best head's
// scores over training for every run, overlaid, one colour per setting). Filling the rows from run folders
// is runner/sweep_collect.h's job; this file only holds and renders them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "findings/head_scores.h"
#include "findings/phase_change.h"

namespace findings {

struct BestHead {
  int layer = 0, head = 0;
  double value = 0;
};

struct SweepRunSummary {
  std::string name;                 // the run's folder under the sweep's out
  nlohmann::ordered_json settings;  // {"model.d_model": 32, "seed": 1}
  std::string setting;              // the settings other than the seed, e.g. "d_model=32"; "base" if none
  std::string status;               // "finished", "interrupted", "started", "missing" or "unreadable"
  std::string problem;              // why, when "unreadable": the one-line error of the file that failed
  int64_t step = 0, steps = 0;      // the checkpoint's step (else the last logged), train.steps
  std::optional<double> train_loss, eval_loss, eval_acc;
  std::optional<double> wall_seconds, tokens_per_s;  // the only fields that differ between equal runs
  // The best head per score (no phase change or curve for the duplicate-token score).
  std::optional<BestHead> task, previous_token, induction, first_token, duplicate_token;
  PhaseChange phase_change;
  Curve task_curve, previous_token_curve, induction_curve;  // the best head's score at each dump
};

struct SweepSummary {
  std::string title;                  // the sweep's out folder
  std::string base;                   // the base config
  nlohmann::ordered_json grid;        // key -> values
  std::vector<SweepRunSummary> runs;  // in the grid's order
};

nlohmann::ordered_json sweep_summary_to_json(const SweepSummary& summary);
std::string sweep_summary_csv(const SweepSummary& summary);
std::string sweep_index_html(const SweepSummary& summary);

}  // namespace findings
