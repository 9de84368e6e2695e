// attograd lens as a library call: the logit lens and the residual decomposition (analysis/residual.h) of one
// input, for the metric logit[answer] - logit[wrong] (or minus the mean logit), and its saved files
// RUN/lens/NAME.{json,svg}. The command line and the Python module both call lens().
#pragma once

#include <string>

#include "analysis/tool.h"
#include "findings/lens_view.h"

namespace analysis {

struct LensRequest {
  Sequence input;    // token names get BOS put in front when missing; ids are taken as given
  Token answer;      // the token the metric rewards; none = the model's top prediction at the last position
  Token wrong;       // the token it subtracts; none = the mean logit (needs answer)
  std::string save;  // "" = write nothing; NAME = RUN/lens/NAME.json and .svg, and report.html rebuilt
};

Output<findings::LensResult> lens(StudyRun& run, const LensRequest& request);

// RUN/lens/NAME.json and .svg, then report.html, under the run's lock; returns the paths written.
std::vector<std::string> save_lens(const StudyRun& run, const std::string& name,
                                   const findings::LensResult& r);

}  // namespace analysis
