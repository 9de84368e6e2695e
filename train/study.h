// What a run leaves for a person to study: the attention maps of fixed probe inputs at dumped steps
// (RUN/attention/step-NNNNNN.json and .svg), the head scores (RUN/scores.json and a table), and the run
// report (RUN/report.html). The probes are the first output.probes held-out sequences; the scores pool
// more of them (up to 64) so that one odd sequence does not decide a head's score.
#pragma once

#include <string>

#include "train/evaluate.h"
#include "train/head_scores.h"

namespace ag {

class TrainObserver;

class Study {
 public:
  Study(const Task& task, const Config& config, const Batch& eval_set);

  void dump_attention(nn::CausalLM<float>& model, const std::string& run_dir, int64_t step) const;
  // Every head's task, previous-token, first-token and induction scores from the model's maps.
  HeadScoresFile head_scores(nn::CausalLM<float>& model, int64_t step) const;
  // The end of a run: scores.json, the score table (to the observer), report.html.
  void finish(nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
              TrainObserver& observer) const;

 private:
  const Task& task_;
  const Config& config_;
  Batch probes_, score_set_, repeated_;
};

// Rebuilds RUN/report.html from the run folder's files (metrics.jsonl, scores.json, attention/*.json).
void write_run_report(const std::string& run_dir, const std::string& title);

}  // namespace ag
