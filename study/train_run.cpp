#include "study/train_run.h"

#include <filesystem>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "study/run_study.h"

namespace study {

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
  RunStudy run_study(config, run_dir);
  observers.push_back(&run_study);
  const train::TrainOptions options{run_dir, resume, stop, observers};
  TrainedRun out;
  out.result = train::train_model(config, options);
  out.score_table = run_study.score_table();
  return out;
}

}  // namespace study
