// A run folder's state, decided in one place for the sweep (which runs to start, resume or leave), sweep
// collect (each run's status), resume and Python (attograd.run_state): new, partial, finished, owned by a
// Slurm task, or being written by another process (findings/run_state.h).
#pragma once

#include <string>

#include "findings/run_state.h"

namespace runner {

struct RunStateOptions {
  // Whether to ask who holds the run now: the run's lock ("busy") and, when it has an owner file, squeue
  // ("owned"; an owner whose job ended is reported stale and the state read from the files). Without,
  // only the run's files decide (sweep collect, which reads the folders as they are).
  bool live = true;
};

// The state of the run folder `dir`. When live, a path that is a file, a folder that holds something but
// is not a run, a planted link among the run's entries and an owner file squeue cannot answer for
// (runner/slurm_jobs.h) throw std::runtime_error, one line naming the path. A config.json or checkpoint that
// cannot be read throws the reader's one-line error.
findings::RunState run_state(const std::string& dir, const RunStateOptions& options = {});

}  // namespace runner
