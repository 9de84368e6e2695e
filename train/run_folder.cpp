#include "train/run_folder.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "io/printable.h"
#include "io/run_layout.h"
#include "train/checkpoint.h"
#include "train/model_factory.h"
#include "train/token_input.h"

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
  run.task = make_task(run.config.task, run.config.seed, run_dir);
  run.model = make_model_to_load<float>(run.config);
  run.step = load_model_checkpoint(path, *run.model);
  return run;
}

void check_input_length(const LoadedRun& run, size_t n, const std::string& argument) {
  if (static_cast<int>(n) > run.config.model.max_len)
    throw std::invalid_argument(argument + ": " + std::to_string(n) +
                                " tokens, but the model takes at most max_len " +
                                std::to_string(run.config.model.max_len));
}

int held_out_count(const LoadedRun& run, int n, const std::string& argument) {
  if (n <= 0) return run.config.train.eval_size;
  const std::string set = "train.eval_size=" + std::to_string(n);
  try {
    (void)from_json(to_json(run.config), run.dir, {set});
  } catch (const std::exception& e) {
    std::string why = e.what();
    const std::string prefix = "--set " + set + ": ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    throw std::invalid_argument(argument + " " + std::to_string(n) + ": " + why);
  }
  return n;
}

std::vector<int32_t> input_from_names(const LoadedRun& run, const std::string& text,
                                      const std::string& argument, bool* bos_added) {
  std::vector<int32_t> ids = parse_token_names(*run.task, text, argument);
  const std::optional<int> bos = run.task->bos_id();
  const bool add = bos && ids.front() != *bos;
  if (add) ids.insert(ids.begin(), *bos);
  if (bos_added) *bos_added = add;
  check_input_length(run, ids.size(), argument);
  return ids;
}

std::vector<int32_t> input_from_ids(const LoadedRun& run, const std::string& text,
                                    const std::string& argument) {
  std::vector<int32_t> ids = parse_token_ids(run.task->vocab_size(), text, argument);
  check_input_length(run, ids.size(), argument);
  return ids;
}

}  // namespace train
