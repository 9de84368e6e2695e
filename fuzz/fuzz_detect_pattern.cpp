// The detection-pattern file reader (`attograd detect --pattern FILE.json`): the input is the file, and
// findings::detection_rule reads it through the bounded JSON reader and the pattern file's table. A rule
// accepted must be a named rule, an offset, or a T x T matrix of finite numbers; anything else must be a
// one-line error. A crash, a hang or a broken message is a finding.
#include <cmath>

#include "findings/head_detect.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/pattern.json";
  fuzz::write_file(path, data, size);
  findings::DetectionRule r;
  try {
    r = findings::detection_rule(path);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
    return 0;
  }
  if (r.rule == "matrix") {
    const size_t T = r.matrix.size();
    bool ok = T > 0;
    for (const auto& row : r.matrix) {
      ok = ok && row.size() == T;
      for (double x : row) ok = ok && std::isfinite(x);
    }
    if (!ok) {
      std::fprintf(stderr, "a pattern that is not a T x T matrix of finite numbers was accepted\n");
      std::abort();
    }
  } else if (r.rule != "offset" && r.rule != "previous" && r.rule != "duplicate" && r.rule != "induction" &&
             r.rule != "first") {
    std::fprintf(stderr, "an unknown rule was accepted\n");
    std::abort();
  }
  (void)r.describe();
  return 0;
}
