// Training a config into a run folder with the run's study, as `attograd train` and the Python module's
// attograd.train do it: the folder checked and locked (one writer per run folder), an old run cleared only
// when asked, the trainer run with the study (analysis/run_study.h) and the caller's observers. Errors are
// std::invalid_argument naming the folder; the caller's words for its options come in `names`.
// Not for progress output or signals: the caller owns those (the stop flag is its).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "io/run_ownership.h"
#include "train/trainer.h"

namespace runner {

// How the caller names the ways out of "a run is already there", for the error message.
struct RunFolderNames {
  std::string resume = "--resume RUN_DIR";  // continue the run
  std::string out = "--out DIR";            // another folder
  std::string overwrite = "--overwrite";    // replace it
};

// Throws std::invalid_argument "OPTION: expected a folder, got an empty path" or "... expected UTF-8 text
// without control characters": the folder goes into config.json and every message.
void check_folder_argument(const std::string& option, const std::string& dir);

// Makes `run_dir` ready for a new run: only an empty folder or a run is ever written into; a trained run
// there is an error unless `overwrite`, which removes the run's own entries first. Returns the folder's
// lock, to be held until training ends.
std::unique_ptr<io::RunLock> prepare_new_run_folder(const std::string& run_dir, bool overwrite,
                                                    const RunFolderNames& names = {});

// A run to continue from its checkpoint, as `attograd train --resume RUN` and attograd.train(RUN,
// resume=True) give it: the run folder, optionally the config it was started from (it must agree with the
// run's) and --set overrides that change only what does not alter the past (train::resume_settable_fields,
// e.g. train.steps to train longer).
struct ResumeRequest {
  std::string run;
  std::string config;
  std::vector<std::string> sets;
  std::string run_field = "--resume";  // how the caller names `run` in messages
};

struct ResumedRun {
  train::Config config;               // the run's own config with the overrides, output.dir = the run
  std::unique_ptr<io::RunLock> lock;  // held until training ends
};

// Checks the request against the run (runner/run_state.h: a run with a checkpoint), reads its config and
// locks it (refused at once while another process writes it). Errors are one line naming the run, the config
// or the --set that is wrong.
ResumedRun prepare_resume(const ResumeRequest& request);

struct TrainedRun {
  train::TrainResult result;
  std::string score_table;  // the head-score and circuits tables of a finished run (empty otherwise)
};

// Trains `config` into `run_dir` (prepared, and locked by the caller) with the run's study after the
// caller's observers; `resume` continues from the folder's checkpoint. Throws what train_model throws.
TrainedRun train_with_study(const train::Config& config, const std::string& run_dir, bool resume,
                            const std::atomic<bool>* stop, std::vector<train::TrainObserver*> observers);

}  // namespace runner
