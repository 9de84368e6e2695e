// What a run folder holds now (runner/run_state.h decides it): new, partial, finished, owned by a Slurm job
// or being written by another process, with the facts it was decided from. Plain data and its JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace findings {

struct RunState {
  std::string path;
  // "new": no checkpoint (no folder, an empty one, or a run that never saved); "partial": a checkpoint
  // short of train.steps (interrupted: resume continues it); "finished": the checkpoint and the final
  // scores at train.steps; "owned": a queued or running Slurm task owns the run; "busy": another process
  // holds the run's lock (it is being written).
  std::string state;
  std::optional<int64_t> step;   // the checkpoint's step
  std::optional<int64_t> steps;  // the run's train.steps (config.json)
  std::string owner;             // "owned": who, e.g. "job 1234 (RUNNING)"; else ""
  bool stale_owner = false;      // an owner file whose Slurm job has ended (left by a killed task)
  std::string holder_pid;        // "busy": the pid holding the lock
};

// {"path", "state", "step", "steps", "owner", "stale_owner", "holder_pid"}; absent facts are null.
nlohmann::ordered_json run_state_to_json(const RunState& state);

}  // namespace findings
