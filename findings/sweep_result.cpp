#include "findings/sweep_result.h"

namespace findings {

nlohmann::ordered_json sweep_result_to_json(const SweepResult& r) {
  nlohmann::ordered_json j;
  j["sweep"] = r.sweep;
  j["out"] = r.out;
  j["mode"] = r.mode;
  j["total"] = r.total;
  j["finished_before"] = r.finished_before;
  j["owned"] = r.owned;
  if (r.mode == "run") {
    j["jobs"] = r.jobs;
    j["threads"] = r.threads;
    j["finished"] = r.finished;
    j["failed"] = r.failed;
    j["interrupted"] = r.interrupted;
    j["stopped"] = r.stopped;
  } else if (r.mode == "commands") {
    j["commands"] = r.commands;
  } else {
    j["slurm_script"] = r.slurm_script;
    j["slurm_job_name"] = r.slurm_job_name;
    j["cpus_per_task"] = r.cpus_per_task;
  }
  j["runs"] = nlohmann::ordered_json::array();
  for (const SweepRunOutcome& o : r.runs) {
    nlohmann::ordered_json run;
    run["name"] = o.name;
    run["dir"] = o.dir;
    run["state"] = o.state;
    run["outcome"] = o.outcome;
    if (!o.owner.empty()) run["owner"] = o.owner;
    if (o.outcome == "failed") {
      run["exit_code"] = o.exit_code;
      run["problem"] = o.problem;
    }
    j["runs"].push_back(std::move(run));
  }
  return j;
}

}  // namespace findings
