#include "findings/run_state.h"

namespace findings {

nlohmann::ordered_json run_state_to_json(const RunState& s) {
  nlohmann::ordered_json j;
  j["path"] = s.path;
  j["state"] = s.state;
  j["step"] = s.step ? nlohmann::ordered_json(*s.step) : nlohmann::ordered_json(nullptr);
  j["steps"] = s.steps ? nlohmann::ordered_json(*s.steps) : nlohmann::ordered_json(nullptr);
  j["owner"] = s.owner.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.owner);
  j["stale_owner"] = s.stale_owner;
  j["holder_pid"] =
      s.holder_pid.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.holder_pid);
  return j;
}

}  // namespace findings
