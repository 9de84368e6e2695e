#include "findings/generate_view.h"

namespace findings {

nlohmann::json generate_to_json(const GenerateResult& r) {
  return {{"prompt", r.prompt}, {"generated", r.generated}, {"ids", r.ids}, {"stopped", r.stopped}};
}

std::string generate_table(const GenerateResult& r) {
  std::string out = "prompt:    " + r.prompt_text + "\ngenerated: " + r.generated_text + "\n";
  if (r.stopped == "max_len")
    return out + "stopped: max_len (the model reads at most " + std::to_string(r.max_len) + " tokens)\n";
  return out + "stopped: max_new (" + std::to_string(r.generated.size()) + " tokens)\n";
}

}  // namespace findings
