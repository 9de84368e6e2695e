// What `attograd sweep` (runner/sweep.h) did: the state each run was found in and what became of it, or,
// when it only planned, the commands it printed or the Slurm script it wrote. Plain data and its JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct SweepRunOutcome {
  std::string name;   // the run's folder under the sweep's out
  std::string dir;    // OUT/NAME
  std::string state;  // as found (findings/run_state.h): "new", "partial", "finished" or "owned"
  // "finished" (trained here), "failed", "interrupted", "skipped" (finished already), "owned" (left to its
  // Slurm task), "not started" (stopped before its turn), "planned" (a printed command or Slurm task).
  std::string outcome;
  std::string owner;    // "owned": who, e.g. "job 1234 (RUNNING)"
  int exit_code = 0;    // "failed": the child's exit code (-1: killed by a signal)
  std::string problem;  // "failed": the last line of its log
};

struct SweepResult {
  std::string sweep;          // the sweep file
  std::string out;            // its out folder
  std::string mode;           // "run", "commands" (--print-commands) or "slurm"
  int jobs = 0, threads = 0;  // "run": runs at a time, threads each
  int64_t total = 0, finished_before = 0, owned = 0;
  int64_t finished = 0, failed = 0, interrupted = 0;  // "run": of the runs started here
  bool stopped = false;                               // "run": Ctrl-C (or SIGTERM) stopped the sweep
  std::vector<SweepRunOutcome> runs;                  // in the grid's order
  std::vector<std::string> commands;                  // "commands": one `attograd train` line per run
  std::string slurm_script;                           // "slurm": the script written
  std::string slurm_job_name;
  int cpus_per_task = 0;  // "slurm": each task's
};

nlohmann::ordered_json sweep_result_to_json(const SweepResult& result);

}  // namespace findings
