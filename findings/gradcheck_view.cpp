#include "findings/gradcheck_view.h"

#include <cstdio>

namespace findings {

nlohmann::json gradcheck_to_json(const GradcheckReport& r) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const GradcheckTensor& t : r.tensors)
    tensors.push_back(
        {{"name", t.name}, {"worst_rel_error", t.worst_rel_error}, {"worst_index", t.worst_index}});
  return {{"config", r.config},         {"note", r.note},     {"T", r.T},
          {"parameters", r.parameters}, {"tensors", tensors}, {"worst", r.worst},
          {"tolerance", r.tolerance},   {"pass", r.pass}};
}

std::string gradcheck_header(const GradcheckReport& r) {
  return "gradcheck " + r.config + ": " + r.note + ", T " + std::to_string(r.T) + ", " +
         std::to_string(r.parameters) + " parameters in " + std::to_string(r.tensors.size()) +
         " tensors, float64 central differences\n";
}

std::string gradcheck_table(const GradcheckReport& r) {
  std::string out;
  char line[512];
  for (const GradcheckTensor& t : r.tensors) {
    std::snprintf(line, sizeof line, "%-40s worst relative error %.3e (element %lld)\n", t.name.c_str(),
                  t.worst_rel_error, static_cast<long long>(t.worst_index));
    out += line;
  }
  std::snprintf(line, sizeof line, "%s: worst relative error %.3e (tolerance %.1e)\n",
                r.pass ? "PASS" : "FAIL", r.worst, r.tolerance);
  return out + line;
}

}  // namespace findings
