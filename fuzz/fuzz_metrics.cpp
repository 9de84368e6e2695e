// RUN/metrics.jsonl as `attograd train --resume` and the report read it back.
#include "fuzz/fuzz_common.h"
#include "train/metrics_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/metrics.jsonl";
  fuzz::write_file(path, data, size);
  try {
    train::read_metrics_jsonl(path);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e, fuzz::Rule::strict);
  }
  return 0;
}
