// attograd gradcheck as a library call: the whole model's loss against central differences in float64,
// every parameter tensor, on a config's architecture shrunk to a checkable size (the report says how).
// Reads no run: a standalone tool (attograd.gradcheck(config, ...) in Python).
#pragma once

#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/gradcheck_view.h"

namespace analysis {

struct GradcheckRequest {
  std::string config;            // the config file
  std::vector<std::string> set;  // overrides "key.path=value", as train's --set
  double tolerance = 1e-6;       // worst relative error allowed
};

Output<findings::GradcheckReport> gradcheck(const GradcheckRequest& request);

}  // namespace analysis
