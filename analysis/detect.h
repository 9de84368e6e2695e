// attograd detect as a library call: every head scored against a detection pattern, as TransformerLens's
// detect_head does (findings/head_detect.h), over the run's held-out sequences or one input. The command
// line and the Python module both call detect().
#pragma once

#include <string>

#include "analysis/tool.h"
#include "findings/head_detect.h"

namespace analysis {

struct DetectRequest {
  std::string pattern;       // previous, duplicate, induction, first, or a rule FILE.json
  std::string mode = "mul";  // mul or abs
  Sequence input;            // one input (token names get BOS put in front); none = held-out sequences
  int n = 0;                 // held-out sequences; 0 = the config's train.eval_size
};

Output<findings::DetectResult> detect(StudyRun& run, const DetectRequest& request);

}  // namespace analysis
