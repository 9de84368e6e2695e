// The model checkpoint reader as `attograd eval/forward/attend` use it: the input is
// RUN/checkpoint/model.safetensors, and load_run reads its header, the config in its metadata, checks
// the tensor table and builds the model. Any outcome but a model (with finite weights within the bound) or
// a one-line error is a finding.
#include <cmath>
#include <filesystem>

#include "fuzz/fuzz_common.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string run = [] {
    const std::string dir = fuzz::scratch_dir() + "/run";
    std::filesystem::create_directories(dir + "/checkpoint");
    return dir;
  }();
  fuzz::write_file(run + "/checkpoint/model.safetensors", data, size);
  try {
    const train::LoadedRun loaded = train::load_run(run);
    if (loaded.model->parameter_count() * 4 > static_cast<int64_t>(size)) {
      std::fprintf(stderr, "a model larger than its file was built\n");
      std::abort();
    }
    // A loaded model's weights are finite and within the bound (train::kMaxWeightMagnitude).
    for (const auto& p : loaded.model->named_parameters())
      for (float x : p.tensor->to_vector())
        if (!(std::fabs(x) <= train::kMaxWeightMagnitude)) {
          std::fprintf(stderr, "tensor %s was loaded holding %g\n", p.name.c_str(), static_cast<double>(x));
          std::abort();
        }
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
