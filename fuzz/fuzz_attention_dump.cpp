// RUN/attention/step-NNNNNN.json as the report and `attograd compare` read it back.
#include "findings/attention_maps.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/step-000100.json";
  fuzz::write_file(path, data, size);
  try {
    findings::read_attention_dump(path);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e, fuzz::Rule::strict);
  }
  return 0;
}
