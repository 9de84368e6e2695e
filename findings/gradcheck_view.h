// What `attograd gradcheck` finds, as plain data: each parameter tensor's worst relative error between the
// analytic gradient and float64 central differences, the worst of all against the tolerance, and the
// (shrunk) architecture it was checked on. analysis/gradcheck.h computes it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct GradcheckTensor {
  std::string name;
  double worst_rel_error = 0;
  int64_t worst_index = 0;  // the element where the worst error was
};

struct GradcheckReport {
  std::string config;  // the config file
  std::string note;    // how the architecture was shrunk to a checkable size, and the batch
  int T = 0;
  int64_t parameters = 0;
  std::vector<GradcheckTensor> tensors;
  double worst = 0, tolerance = 0;
  bool pass = false;  // worst <= tolerance
};

// {"config", "note", "T", "parameters", "tensors": [{"name", "worst_rel_error", "worst_index"}], "worst",
// "tolerance", "pass"}.
nlohmann::json gradcheck_to_json(const GradcheckReport& r);

// The header line, one line per tensor and the PASS/FAIL line.
std::string gradcheck_header(const GradcheckReport& r);
std::string gradcheck_table(const GradcheckReport& r);

}  // namespace findings
