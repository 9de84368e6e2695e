// Reading a sweep's run folders back into its summary (findings/sweep_summary.h), wherever the runs were
// trained: OUT/sweep.json (written by `attograd sweep`, also with --print-commands) lists the runs and their
// settings; each run folder gives its metrics.jsonl, scores.json and recorded scores.
#pragma once

#include <string>

#include "findings/sweep_summary.h"

namespace runner {

// Throws std::runtime_error naming the file when OUT/sweep.json or a run's file is missing or malformed;
// a run folder that does not exist (or has not finished) is a row with its status, not an error.
findings::SweepSummary collect_sweep(const std::string& out_dir);

// OUT/summary.json, OUT/summary.csv and OUT/index.html, each written atomically.
void write_sweep_summary(const std::string& out_dir, const findings::SweepSummary& summary);

}  // namespace runner
