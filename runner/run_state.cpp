#include "runner/run_state.h"

#include <filesystem>

#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "runner/slurm_jobs.h"
#include "train/checkpoint.h"

namespace runner {

findings::RunState run_state(const std::string& dir, const RunStateOptions& options) {
  namespace fs = std::filesystem;
  findings::RunState s;
  s.path = dir;
  s.state = "new";
  // A file, or a folder that is not a run, where a run goes; a planted link in a run: refused.
  if (options.live && io::check_new_run_folder(dir)) {
    if (const std::optional<io::SlurmOwner> owner = io::read_slurm_owner(dir)) {
      const std::string slurm = live_slurm_state(*owner, io::layout::slurm_owner(dir));
      s.stale_owner = slurm.empty();
      if (!s.stale_owner)
        s.owner = (owner->job_id.empty() ? "array " + owner->job_name + " task " + std::to_string(owner->task)
                                         : "job " + owner->job_id) +
                  " (" + slurm + ")";
    }
    s.holder_pid = io::folder_lock_holder(dir);
    io::check_run_entries(dir);  // before anything reads through a planted link
  }
  const std::string config = io::layout::config_json(dir);
  if (fs::exists(config)) {
    const nlohmann::json j = io::parse_json_text(io::read_text_file(config), config);
    if (j.is_object() && j.contains("train") && j["train"].is_object() && j["train"].contains("steps") &&
        j["train"]["steps"].is_number_integer())
      s.steps = j["train"]["steps"].get<int64_t>();
  }
  const std::string checkpoint = io::layout::model_checkpoint(dir);
  if (fs::exists(checkpoint)) {
    s.step = train::step_from_checkpoint(checkpoint);
    s.state = "partial";
    const std::string scores = io::layout::scores_json(dir);
    if (s.steps && fs::exists(scores)) {
      const nlohmann::json j = io::parse_json_text(io::read_text_file(scores), scores);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
          j["step"].get<int64_t>() == *s.steps)
        s.state = "finished";
    }
  }
  if (!s.owner.empty())
    s.state = "owned";
  else if (!s.holder_pid.empty())
    s.state = "busy";
  return s;
}

}  // namespace runner
