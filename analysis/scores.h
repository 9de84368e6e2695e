// attograd scores as a library call: every head's scores at a run's checkpoint (task, previous-token,
// first-token, induction, duplicate-token; docs/head-scores.md), computed on the run's held-out set as the
// end of training computes them (analysis::Study). Prints only: RUN/scores.json is training's and ablate's.
#pragma once

#include "analysis/tool.h"
#include "findings/head_scores.h"

namespace analysis {

// ids: the user's sequences (analysis::sequences_batch: whole sequences, the model reads all but the last
// token), at most 64 of them read; empty: the run's held-out set. The induction score reads its own
// repeated random sequences either way.
struct ScoresRequest {
  std::vector<Sequence> ids;
};

Output<findings::HeadScoresFile> scores(StudyRun& run, const ScoresRequest& request);

}  // namespace analysis
