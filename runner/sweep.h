// Running a sweep (train/sweep.h: one base config and a grid): which runs to start, resume or leave (each
// run's state, runner/run_state.h), launching `attograd train` child processes N at a time with progress
// through an observer, stopping them at a checkpoint on request, or instead printing their commands or
// writing a Slurm job array (runner/slurm_jobs.h); and collecting the runs' summary. `attograd sweep` and
// Python's attograd.sweep / attograd.sweep_collect call these.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "analysis/tool.h"
#include "findings/sweep_result.h"
#include "findings/sweep_summary.h"

namespace runner {

struct SweepRequest {
  std::string file;             // the sweep file (docs/sweeps.md)
  int jobs = 0;                 // runs at a time; 0: one per two cores
  bool print_commands = false;  // plan only: one `attograd train` command per unfinished run (not with slurm)
  std::string slurm;            // plan only: write a Slurm job-array script for the unfinished runs here
  int cpus_per_task = 0;        // with slurm: each task's cpus and train.threads; 0: the runs' train.threads
  // The attograd program the children run: "" = this program when it is attograd, else `attograd` on PATH.
  std::string program;
};

// Where a running sweep is, for a progress line.
struct SweepProgress {
  int64_t done = 0, total = 0, running = 0, left = 0, failed = 0, interrupted = 0;
  std::optional<double> eta_seconds;  // once a run finished here: the time the rest should take
};

// What a running sweep reports, on the calling thread, in this order: on_owned per run left to a Slurm
// task, on_start once, then on_progress (after each change, with `changed`, and about every 20 ms without),
// on_failed per failed run and on_stopping per stop request passed on to the children.
class SweepObserver {
 public:
  virtual ~SweepObserver() = default;
  virtual void on_owned(const findings::SweepRunOutcome&) {}
  virtual void on_start(const findings::SweepResult&) {}
  virtual void on_progress(const SweepProgress&, bool /*changed*/) {}
  virtual void on_failed(const findings::SweepRunOutcome&, const std::string& /*log*/) {}
  virtual void on_stopping(bool /*first*/) {}
};

// Runs the sweep: every run's folder is checked first (a folder holding another config, a file, a run in
// use by another process: nothing starts), OUT/sweep.json is written under the sweep folder's lock, then
// each run that is neither finished nor owned by a live Slurm task is trained (new) or resumed (partial)
// by a child `attograd train`, its output in the run's train.log, and the summary collected. Each increase
// of `*stop_signals` is passed on to the running children (SIGINT): the first stops them at a checkpoint
// and starts no more, a second ends them. With print_commands or slurm, nothing is trained: the result
// holds the commands, or the script is written and each planned run marked as the array's. Errors:
// RequestError (a bad request, "slurm FILE: no run to submit"), the sweep file's ConfigError, a run
// folder's one-line error.
analysis::Output<findings::SweepResult> sweep(const SweepRequest& request, SweepObserver* observer = nullptr,
                                              const std::atomic<int>* stop_signals = nullptr);

// Reads OUT's run folders into its summary (runner/sweep_collect.h) and writes OUT/summary.json,
// summary.csv and index.html under the sweep folder's lock (not while a sweep runs there).
analysis::Output<findings::SweepSummary> sweep_collect(const std::string& out);

}  // namespace runner
