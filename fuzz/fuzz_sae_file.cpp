// The SAE file reader as `attograd sae` writes and SAELens-style tools read it: the input is
// sae.safetensors, and load_sae reads it (header, the four tensors W_enc (d_in, d_sae), b_enc, W_dec
// (d_sae, d_in), b_dec with consistent shapes, finite values). Any outcome but an SAE whose shapes agree
// and whose values are finite, or a one-line error, is a finding.
#include <cmath>

#include "dictionary/sae.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/sae.safetensors";
  fuzz::write_file(path, data, size);
  try {
    const dictionary::SaeParams<float> p = dictionary::load_sae(path);
    const int64_t d = p.d_in(), m = p.d_sae();
    if (p.b_enc.numel() != m || p.b_dec.numel() != d || p.W_dec.size(0) != m || p.W_dec.size(1) != d) {
      std::fprintf(stderr, "an SAE with inconsistent shapes was loaded\n");
      std::abort();
    }
    if ((2 * d * m + d + m) * 4 > static_cast<int64_t>(size)) {
      std::fprintf(stderr, "an SAE larger than its file was loaded\n");
      std::abort();
    }
    for (const ag::Tensor<float>* t : {&p.W_enc, &p.b_enc, &p.W_dec, &p.b_dec})
      for (float x : t->to_vector())
        if (!std::isfinite(x)) {
          std::fprintf(stderr, "a non-finite value was loaded\n");
          std::abort();
        }
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
