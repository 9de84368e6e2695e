// The progress measures of grokking during a run (docs/grokking.md): a train::TrainObserver that, every
// output.measures_every steps and at the end, runs the Fourier analysis (analysis/fourier.h) on the model as
// it is and appends its numbers to RUN/measures.jsonl. No checkpoint is needed per measured step.
// On resume it keeps the lines up to the checkpoint's step, so a resumed run's file equals an
// uninterrupted run's.
#pragma once

#include <memory>
#include <string>

#include "analysis/fourier.h"
#include "train/trainer.h"

namespace analysis {

class ProgressMeasures : public train::TrainObserver {
 public:
  // `task` is the run's task (its split says which pairs are held out).
  ProgressMeasures(const train::Task& task, std::string run_dir, int every);
  void on_start(const train::Config& config, int64_t first_step, int64_t params) override;
  void on_model(const nn::CausalLM<float>& model, int64_t step, bool finished) override;

 private:
  ModularAddition data_;
  std::string path_;
  int every_;
  int64_t last_ = -1;  // the last step measured
};

}  // namespace analysis
