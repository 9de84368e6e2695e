// What a run leaves for a person to study: the attention maps of fixed probe inputs at dumped steps
// (RUN/attention/step-NNNNNN.json and .svg), the head scores at each of those steps (RUN/scores/
// step-NNNNNN.json) and at the end with the phase-change steps (RUN/scores.json and a table), and the run
// report (RUN/report.html). The probes are the first output.probes held-out sequences; the scores pool
// more of them (up to 64) so that one odd sequence does not decide a head's score.
// RunStudy watches a training run (a train::TrainObserver); Study serves the commands that open a run later.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "analysis/progress_measures.h"
#include "findings/circuits_view.h"
#include "findings/head_scores.h"
#include "findings/sae_view.h"
#include "nn/transformer.h"
#include "train/trainer.h"

namespace analysis {

class Study {
 public:
  Study(const train::Task& task, const train::Config& config, const train::Batch& eval_set);

  void dump_attention(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step) const;
  // Every head's task, previous-token, first-token and induction scores from the model's maps.
  findings::HeadScoresFile head_scores(const nn::CausalLM<float>& model, int64_t step) const;
  // The scores at a dumped step, written to RUN/scores/step-NNNNNN.json with the run's training time so far.
  void record_scores(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
                     double wall_seconds) const;
  // The end of a run: scores.json (with the phase-change steps from the recorded scores) and report.html;
  // returns the score table for a person to read.
  std::string finish(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
                     double wall_seconds) const;

 private:
  const train::Task& task_;
  const train::Config& config_;
  train::Batch probes_, score_set_, repeated_;
};

// The study of a training run as it goes: attention dumps every output.attention_every steps (and at
// step 0 and the last step), and scores, scores.json, the circuits (write_circuits_files; composition only
// with >= 2 layers) and report.html when the run finishes.
class RunStudy : public train::TrainObserver {
 public:
  // `config` must outlive the RunStudy.
  RunStudy(const train::Config& config, const std::string& run_dir);
  void on_start(const train::Config& config, int64_t first_step, int64_t params) override;
  void on_model(const nn::CausalLM<float>& model, int64_t step, bool finished) override;
  // The head-score and circuits tables of the finished run (empty before).
  const std::string& score_table() const { return score_table_; }

 private:
  const train::Config& config_;
  std::string run_dir_;
  std::unique_ptr<train::Task> task_;
  train::Batch eval_set_;
  Study study_;
  std::unique_ptr<ProgressMeasures> measures_;  // output.measures_every > 0
  std::string score_table_;
  // Training time: what earlier processes of a resumed run recorded, plus this process's time since start.
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::optional<double> earlier_seconds_;
  double wall_seconds(int64_t step);
};

// The scores recorded at each dumped step (RUN/scores/step-*.json), in step order; empty when none.
std::vector<findings::HeadScoresFile> read_score_history(const std::string& run_dir);

// The phase-change steps of a run folder, from its recorded scores and metrics.jsonl.
findings::PhaseChange run_phase_change(const std::string& run_dir);

// The circuit analysis of `model` (analysis/circuits.h) as a run folder holds it: DLA on the run's held-out
// set, eval_set(seed, train.eval_size), positional maps over the task's length; `step` recorded.
findings::CircuitsResult run_circuits(const nn::CausalLM<float>& model, const train::Task& task,
                                      const train::Config& config, int64_t step, bool with_composition);

// run_circuits written to RUN/circuits.json and RUN/circuits/{composition,positional_qk}.svg, then
// report.html rebuilt. Composition is computed when with_composition (the model needs >= 2 layers).
findings::CircuitsResult write_circuits_files(const nn::CausalLM<float>& model, const train::Task& task,
                                              const train::Config& config, const std::string& run_dir,
                                              int64_t step, bool with_composition);

// Whether a model of `config` trained on `task` is one the Fourier analysis reads (analysis/fourier.h):
// modular addition of 2 operands with an odd modulus, and an MLP.
bool reads_fourier(const train::Task& task, const train::Config& config);

// The Fourier analysis of `model` written to RUN/fourier/fourier.json and RUN/fourier/*.svg (with the
// progress measures' chart when RUN/measures.jsonl exists), then report.html rebuilt.
findings::FourierReport write_fourier_files(const nn::CausalLM<float>& model, const train::Task& task,
                                            const train::Config& config, const std::string& run_dir,
                                            int64_t step);

// The SAEs trained on the run: each RUN/sae/POINT/eval.json (folders in name order; one without eval.json
// is skipped) read into `saes`, and its features.html's path relative to the run folder into `pages`
// (empty when missing). A malformed eval.json is one line naming the file and the field.
void read_saes(const std::string& run_dir, std::vector<findings::SaeEvalSummary>* saes,
               std::vector<std::string>* pages);

// Rebuilds RUN/report.html from the run folder's files (metrics.jsonl, scores.json, scores/*.json,
// attention/*.json, circuits.json, patching/*.json, lens/*.json, fourier/, measures.jsonl, sae/*/eval.json).
void write_run_report(const std::string& run_dir, const std::string& title);

// What write_run_report would refuse, checked before a tool's long work: every file the report reads (but
// those of the SAE folder `replacing`, about to be rewritten) and report.html's place.
void check_run_report(const std::string& run_dir, const std::string& replacing = "");

}  // namespace analysis
