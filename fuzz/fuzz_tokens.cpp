// --tokens and --ids parsing: the first three bytes choose the task (kind, vocab, length), the rest is the
// argument's text. Names that parse must print back as themselves; ids must lie in the vocabulary.
#include <sstream>

#include "fuzz/fuzz_common.h"
#include "train/tasks.h"
#include "train/token_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::vector<std::string>& kinds = train::task_kinds();
  train::TaskConfig config;
  config.kind = kinds[data[0] % kinds.size()];
  config.vocab = 2 + data[1] % 40;
  config.length = 1 + data[2] % 12;
  if (train::find_task_problem(config)) return 0;
  const std::unique_ptr<train::Task> task = train::make_task(config, 1);
  const std::string text(reinterpret_cast<const char*>(data + 3), size - 3);
  try {
    const std::vector<int32_t> ids = train::parse_token_names(*task, text, "--tokens");
    std::istringstream words(text);
    std::string word;
    for (int32_t id : ids) {
      words >> word;
      if (task->token_name(id) != word) std::abort();
    }
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  try {
    for (int32_t id : train::parse_token_ids(task->vocab_size(), text, "--ids"))
      if (id < 0 || id >= task->vocab_size()) std::abort();
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
