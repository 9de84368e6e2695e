// The mapped safetensors reader as `attograd import` uses it on another program's model file: the header's
// checks (sizes, offsets tiling the data, F32/F16/BF16 byte counts), then every tensor read and released.
#include <vector>

#include "fuzz/fuzz_common.h"
#include "train/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/mapped.safetensors";
  fuzz::write_file(path, data, size);
  try {
    const train::MappedSafetensors file(path);
    std::vector<float> values;
    for (const auto& t : file.tensors()) {
      // The header was checked against the file: each tensor's bytes are inside it, so its size is bounded.
      const uint64_t bytes = t.end - t.begin;
      if (bytes > size) std::abort();
      values.resize(bytes / (t.dtype == train::Dtype::f32 ? 4 : 2));
      file.read(t, values.data());
      file.release(t);
    }
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
