// The data files of the kinds that read one: the first byte chooses sequences or text (and the text's
// unit and window), the second the train fraction, the rest is the file. A file is either refused with one
// printable line or gives a task whose batches hold only ids of its vocabulary.
#include "fuzz/fuzz_common.h"
#include "train/tasks.h"
#include "train/tasks/data_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  train::TaskConfig config;
  const bool text = data[0] & 1;
  config.kind = text ? "text" : "sequences";
  config.path = "data";
  config.unit = data[0] & 2 ? "byte" : "char";
  config.length = 1 + (data[0] >> 2) % 16;
  config.train_fraction = (data[1] % 10) / 10.0;  // 0 = the file's own split (or text's 90%)
  const std::string file(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    std::unique_ptr<train::Task> task =
        text ? train::tasks::make_text_task(config, file) : train::tasks::make_sequences_task(config, file);
    task->prepare(data[1]);
    ag::Rng rng(1);
    for (const train::Batch& batch : {task->training_batch(3, 4, rng), task->eval_set(1, 4)}) {
      if (batch.inputs.size() != static_cast<size_t>(batch.B) * batch.T) std::abort();
      for (int32_t id : batch.inputs)
        if (id < 0 || id >= task->vocab_size()) std::abort();
      for (int32_t id : batch.targets)
        if (id < -1 || id >= task->vocab_size()) std::abort();
    }
    for (int id = 0; id < task->vocab_size(); ++id)
      if (task->token_id(task->token_name(id)) != id) std::abort();
  } catch (const train::TaskDataError& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
