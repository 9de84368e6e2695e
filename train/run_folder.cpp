#include "train/run_folder.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "io/printable.h"
#include "io/run_layout.h"
#include "train/checkpoint.h"
#include "train/model_factory.h"

namespace train {

LoadedRun load_run(const std::string& run_dir) {
  if (!std::filesystem::is_directory(run_dir))
    throw std::runtime_error(run_dir + ": not a run folder (no such directory)");
  const std::string path = io::layout::model_checkpoint(run_dir);
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path +
                             ": missing (train the run first, or give the run folder, not the config)");
  LoadedRun run;
  run.dir = run_dir;
  // The checkpoint carries its own config, so the model is rebuilt exactly as it was trained.
  run.config = config_from_checkpoint(path);
  run.task = make_task(run.config.task, run.config.seed);
  run.model = make_model<float>(run.config);
  run.step = load_model_checkpoint(path, *run.model);
  return run;
}

}  // namespace train
