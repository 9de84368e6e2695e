// attograd generate as a library call: a prompt's continuation a token at a time (nn/generate.h), each
// token drawn from the last position's logits and read in turn through the model's key/value cache. The
// command line and the Python module both call generate(); the same request and seed give the same tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/tool.h"
#include "findings/generate_view.h"

namespace analysis {

struct GenerateRequest {
  Sequence tokens;                    // the prompt as token names (BOS put in front when missing) or ids
  std::optional<std::string> prompt;  // or as text: a text model's characters, else token names
  int64_t max_new = -1;  // tokens to generate, 0..100000, the context sliding past max_len; -1 = to max_len
  double temperature = 1.0;  // 0 = greedy (argmax); otherwise sample softmax(logits / temperature)
  int64_t top_k = 0;         // sample among the K most likely tokens only; 0 = every token
  uint64_t seed = 0;         // of the sampling: the same seed, the same tokens
  bool prepend_bos = true;   // put the task's BOS in front of text and token names that lack it
};

// Each token past the window costs a full forward: the work is bounded up front.
constexpr int64_t kMaxNewTokens = 100000;

Output<findings::GenerateResult> generate(StudyRun& run, const GenerateRequest& request);

}  // namespace analysis
