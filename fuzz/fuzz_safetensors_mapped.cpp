// The mapped safetensors reader as `attograd import` uses it on another program's model file: the header's
// checks (sizes, offsets tiling the data, each dtype's byte counts), then every float tensor read and
// released, every other refused with a one-line error.
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
      values.resize(bytes / train::dtype_bytes(t.dtype));
      // A buffer's dtype (BOOL, I64, ...): reading it is a one-line error.
      if (!train::dtype_is_float(t.dtype)) {
        try {
          file.read(t, values.data());
        } catch (const std::exception& e) {
          fuzz::check_one_line(e);
          continue;
        }
        std::abort();
      }
      file.read(t, values.data());
      file.release(t);
    }
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
