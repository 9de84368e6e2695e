// attograd entropy as a library call: each layer's and head's mean attention entropy, in nats, on the run's
// held-out sequences or the user's. A head that looks at one key has entropy 0; one that spreads its weight
// evenly over the i + 1 keys of query i has log(i + 1), the most it can have (the result's `uniform` is its
// mean over the same rows).
#pragma once

#include <vector>

#include "analysis/tool.h"
#include "findings/entropy_view.h"

namespace analysis {

struct EntropyRequest {
  int n = 0;                  // held-out sequences; 0 = the config's train.eval_size
  std::vector<Sequence> ids;  // the user's sequences (sequences_batch), instead of held-out ones
};

// Per head, the mean over every sequence and query position i (padding left out) of the entropy of its
// attention row; per layer, the mean over its heads. RequestError naming n or ids for a bad request.
Output<findings::EntropyResult> entropy(StudyRun& run, const EntropyRequest& request);

// One attention row's entropy: -sum_j w_j log w_j, in nats, 0 log 0 = 0.
double attention_entropy(const std::vector<float>& row);

}  // namespace analysis
