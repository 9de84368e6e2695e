#include "runner/train_run.h"

#include <filesystem>
#include <stdexcept>

#include "analysis/run_study.h"
#include "io/atomic_file.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "runner/run_state.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace runner {

namespace {

// The old run's files go before anything new is written, so a crash in between can never leave the new
// config beside the old checkpoint (which a resume would then continue).
void clear_run_folder(const std::string& run_dir, const std::string& option) {
  namespace fs = std::filesystem;
  for (const std::string& path : io::layout::run_entries(run_dir)) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) throw io::WriteError(path + ": cannot remove for " + option + ": " + ec.message());
  }
}

}  // namespace

void check_folder_argument(const std::string& option, const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument(option + ": expected a folder, got an empty path");
  if (!io::is_printable_utf8(dir))
    throw std::invalid_argument(option + " " + io::printable(dir) +
                                ": expected UTF-8 text without control characters");
}

std::unique_ptr<io::RunLock> prepare_new_run_folder(const std::string& run_dir, bool overwrite,
                                                    const RunFolderNames& names) {
  io::check_new_run_folder(run_dir);
  auto lock = std::make_unique<io::RunLock>(run_dir);
  io::check_new_run_folder(run_dir);  // again: another process may have written it in between
  if (std::filesystem::exists(io::layout::model_checkpoint(run_dir)) && !overwrite)
    throw std::invalid_argument(run_dir + ": already holds a trained run; " + names.resume +
                                " to continue it, " + names.out + " for a new one, or " + names.overwrite +
                                " to replace it");
  if (overwrite) clear_run_folder(run_dir, names.overwrite);
  io::mark_run_folder(run_dir);
  return lock;
}

TrainedRun train_with_study(const train::Config& config, const std::string& run_dir, bool resume,
                            const std::atomic<bool>* stop, std::vector<train::TrainObserver*> observers) {
  analysis::RunStudy run_study(config, run_dir);
  observers.push_back(&run_study);
  const train::TrainOptions options{run_dir, resume, stop, observers};
  TrainedRun out;
  out.result = train::train_model(config, options);
  out.score_table = run_study.score_table();
  return out;
}

ResumedRun prepare_resume(const ResumeRequest& a) {
  check_folder_argument(a.run_field, a.run);
  // The run's files decide (a Slurm task resumes the run it owns; another writer is refused by the lock).
  const std::string ckpt = io::layout::model_checkpoint(a.run);
  if (run_state(a.run, RunStateOptions{false}).state == "new")
    throw std::invalid_argument(a.run_field + " " + a.run + ": no checkpoint at " + ckpt);
  train::check_resume_overrides(a.sets);  // before reading anything: a refused --set is the user's error
  // Always through the overrides' path, which checks this machine's limits (a run may come from another).
  train::Config stored = train::config_from_checkpoint(ckpt);
  stored = train::from_json(train::to_json(stored), ckpt, a.sets);
  const int64_t step = train::step_from_checkpoint(ckpt);
  if (stored.train.steps < step)
    throw std::invalid_argument("--set train.steps=" + std::to_string(stored.train.steps) +
                                ": below the checkpoint's step " + std::to_string(step) + " (" + ckpt +
                                "); a resumed run can only train longer");
  if (!a.config.empty()) {
    train::Config given = train::load_config(a.config, a.sets);
    given.output = stored.output;
    if (given != stored)
      throw std::invalid_argument(a.config + ": differs from the config " + a.run + " was trained with (" +
                                  io::layout::config_json(a.run) + "); resume with " + a.run_field +
                                  " alone, or change only train.steps with --set");
  }
  stored.output.dir = a.run;
  ResumedRun resumed;
  resumed.config = std::move(stored);
  resumed.lock = std::make_unique<io::RunLock>(a.run);  // refused at once while another process writes it
  io::mark_run_folder(a.run);                           // a run trained before run folders had a marker
  return resumed;
}

}  // namespace runner
