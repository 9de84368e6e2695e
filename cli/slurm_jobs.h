// What Slurm says of the array task that owns a run (io::SlurmOwner), asked of `squeue` on PATH: whether
// it is still queued or running, so that `attograd sweep` leaves the run to it. Not the script itself
// (cmd_sweep.cpp writes it) and no other Slurm command.
#pragma once

#include <string>

#include "io/run_ownership.h"

namespace cli {

// The state squeue reports for `owner` while Slurm has it queued or running ("PENDING", "RUNNING",
// "COMPLETING", ...), or "" once it ended or Slurm no longer knows it: a task that started is looked up
// by its job id, a queued one by the array's job name and its task index. Throws std::runtime_error, one
// line naming `owner_file`, when squeue cannot be run, takes more than 60 s, or fails otherwise.
std::string live_slurm_state(const io::SlurmOwner& owner, const std::string& owner_file);

}  // namespace cli
