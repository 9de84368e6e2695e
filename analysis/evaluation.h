// attograd eval as a library call: exact-match accuracy and loss of a run's checkpoint on its held-out
// sequences (the same ones training evaluated, so the numbers agree with metrics.jsonl) or on a finite
// dataset's training sequences.
#pragma once

#include <string>

#include "analysis/tool.h"
#include "findings/eval_view.h"

namespace analysis {

struct EvalRequest {
  std::string split = "heldout";  // "heldout", or "train": a finite dataset's training sequences
  int n = 0;                      // sequences; 0 = train.eval_size held out, or the whole training set
};

Output<findings::EvalReport> evaluate(StudyRun& run, const EvalRequest& request);

}  // namespace analysis
