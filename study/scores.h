// attograd scores as a library call: every head's scores at a run's checkpoint (task, previous-token,
// first-token, induction, duplicate-token; docs/head-scores.md), computed on the run's held-out set as the
// end of training computes them (study::Study). Prints only: RUN/scores.json is training's and ablate's.
#pragma once

#include "findings/head_scores.h"
#include "study/tool.h"

namespace study {

struct ScoresRequest {};

Output<findings::HeadScoresFile> scores(StudyRun& run, const ScoresRequest& request);

}  // namespace study
