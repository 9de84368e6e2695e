// The sweep's Slurm side: the job-array script `attograd sweep --slurm` writes (each task owns its run
// while it trains, io/run_ownership.h), and what Slurm says of the array task that owns a run, asked of
// `squeue` on PATH: whether it is still queued or running, so that a sweep leaves the run to it.
#pragma once

#include <string>
#include <vector>

#include "io/run_ownership.h"

namespace runner {

// The state squeue reports for `owner` while Slurm has it queued or running ("PENDING", "RUNNING",
// "COMPLETING", ...), or "" once it ended or Slurm no longer knows it: a task that started is looked up
// by its job id, a queued one by the array's job name and its task index. Throws std::runtime_error, one
// line naming `owner_file`, when squeue cannot be run, takes more than 60 s, or fails otherwise.
std::string live_slurm_state(const io::SlurmOwner& owner, const std::string& owner_file);

// `s` as one word for the shell: as is when it holds only plain characters, else single-quoted.
std::string shell_quote(const std::string& s);

// A new array job name, "attograd-sweep-XXXXXXXX": unique per generated script, so that a queued task is
// found by name and index.
std::string new_slurm_job_name();

struct SlurmTask {
  std::string run_dir;  // as the commands name it, relative to the generating folder or absolute
  std::string command;  // the `attograd train` line, quoted for the shell
};

// The job array's script: task i trains tasks[i] in the current folder (the job's --chdir), its log
// io::layout::slurm_log_pattern(out); the task writes its run's owner file (with its job id) as it starts
// and removes it as it ends. `source` names the sweep file in the script's comment. RequestError "slurm:
// ..." when the current folder or `out` cannot be written into an #SBATCH line (control bytes, '\\').
std::string slurm_script(const std::string& source, const std::string& out,
                         const std::vector<SlurmTask>& tasks, const std::string& job_name, int cpus_per_task);

}  // namespace runner
