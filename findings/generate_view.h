// What `attograd generate` reports as plain data, its JSON (`generate --json`, Run.generate):
//   {"prompt": [token names], "generated": [token names], "ids": [prompt and generated ids],
//    "stopped": "max_new" or "max_len"}
// and its terminal text. Not for sampling (nn/generate.h does).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct GenerateResult {
  std::vector<std::string> prompt, generated;  // token names ("<id N>" beyond the task's vocabulary)
  std::vector<int> ids;                        // the prompt's ids, then the generated ones
  std::string stopped = "max_new";             // "max_new" or "max_len"
  // The terminal's view: a text model's text, or the token names joined by spaces.
  std::string prompt_text, generated_text;
  int64_t max_len = 0;  // the most tokens the model reads
};

nlohmann::json generate_to_json(const GenerateResult& r);
// "prompt:    ...\ngenerated: ...\nstopped: ...".
std::string generate_table(const GenerateResult& r);

}  // namespace findings
