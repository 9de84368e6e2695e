// A sweep: one base config and a grid of --set values, expanded into one run per point of the grid's
// product. The sweep file (docs/sweeps.md):
//   {"base": "configs/induction.json", "grid": {"seed": [1, 2, 3], "model.d_model": [32, 64]},
//    "out": "runs/induction-sweep"}
// Every run is validated exactly as `attograd train BASE --set key=value ...` would validate it, before
// anything starts. Running the runs (processes, progress, Ctrl-C) is the command line's job; reading the
// finished run folders back is the study's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/config.h"

namespace train {

// The most runs one sweep may hold: a grid beyond this is almost certainly a mistake in the file.
constexpr int64_t kMaxSweepRuns = 10000;
// A sweep file is a few lines; a larger one is not a sweep file (and /dev/zero never ends).
constexpr size_t kMaxSweepFileBytes = size_t{1} << 20;

struct SweepRun {
  std::string name;                    // folder name under out/, made of the settings: "d_model-32_seed-1"
  nlohmann::ordered_json settings;     // {"model.d_model": 32, "seed": 1}, in the grid's key order
  std::vector<std::string> overrides;  // the --set arguments: "model.d_model=32", "seed=1"
  Config config;                       // base + overrides, validated; output.dir = out/name
};

struct Sweep {
  std::string source;           // the sweep file, for error lines
  std::string base;             // the base config file, as the sweep file names it
  std::string out;              // the folder holding one run folder per run
  nlohmann::ordered_json grid;  // key -> array of values, in the file's order
  std::vector<SweepRun> runs;   // the product; the first key varies slowest
};

// Reads, expands and validates a sweep file. Errors are ConfigError, one line naming the sweep file and
// the JSON pointer (or the run and the --set that made it invalid): unknown key, empty grid or value
// list, a value the config refuses, an out folder that is a file, more than kMaxSweepRuns runs.
// Nothing is written.
Sweep load_sweep(const std::string& path);

// The manifest written to out/sweep.json, so that `sweep collect` knows the runs and their settings
// wherever they ran: {"sweep", "base", "out", "grid", "runs": [{"name", "settings", "overrides"}]}.
nlohmann::ordered_json sweep_manifest(const Sweep& sweep);

// The config a run folder must hold to count as this run: everything but output.dir and train.threads
// (which change no result) must match.
bool same_run_config(const Config& a, const Config& b);

}  // namespace train
