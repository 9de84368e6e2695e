#include "analysis/scores.h"

#include "analysis/run_study.h"

namespace analysis {

Output<findings::HeadScoresFile> scores(StudyRun& run, const ScoresRequest& request) {
  Output<findings::HeadScoresFile> out;
  const train::Batch score_set = request.ids.empty()
                                     ? run.task->eval_set(run.config.seed, run.config.train.eval_size)
                                     : sequences_batch(run, request.ids, "ids", &out.notes);
  out.result = Study(*run.task, run.config, score_set).head_scores(*run.model, run.step);
  return out;
}

}  // namespace analysis
