#include "study/scores.h"

#include "study/run_study.h"

namespace study {

Output<findings::HeadScoresFile> scores(StudyRun& run, const ScoresRequest&) {
  const train::Batch score_set = run.task->eval_set(run.config.seed, run.config.train.eval_size);
  Output<findings::HeadScoresFile> out;
  out.result = Study(*run.task, run.config, score_set).head_scores(*run.model, run.step);
  return out;
}

}  // namespace study
