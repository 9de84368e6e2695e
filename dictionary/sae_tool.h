// `attograd sae` and `attograd sae synthetic` as library calls: an SAE trained on a run's activations at a
// hook point, checkpointed and resumable, evaluated on held-out sequences and written as its folder
// (sae.safetensors, checkpoint.safetensors, eval.json, features.json, features.html; io/run_layout.h); and
// an SAE trained on synthetic features with known directions, scored on how well it recovers them.
// The SAE itself is dictionary/sae.h; its activations dictionary/sae_source.h; its evaluation
// dictionary/sae_eval.h.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "dictionary/clt.h"
#include "dictionary/sae.h"
#include "findings/sae_view.h"
#include "train/trainer.h"

namespace dictionary {

struct SaeRequest {
  std::string point;    // hook point of shape (B, T, D), e.g. blocks.0.mlp.post
  std::string config;   // SAE config file (JSON, docs/sae.md); "" = every field's default
  std::string out;      // the SAE's folder; "" = RUN/sae/POINT (and the run's report lists it)
  bool resume = false;  // continue from the folder's checkpoint with the checkpoint's own config
  // The caller's, not the request table's: progress (on_start, on_step, on_log with kind "sae"), and the
  // flag that stops training at the current step with a checkpoint (Ctrl-C).
  train::TrainObserver* progress = nullptr;
  const std::atomic<bool>* stop = nullptr;
};

// What `sae` did: when stopped, only the checkpoint at `steps` was written and `eval` is empty.
struct SaeOutcome {
  findings::SaeEvalSummary eval;
  int64_t steps = 0;
  bool stopped = false;
};

// Checks the request (RequestError naming the field), trains (resuming when asked), evaluates and writes
// the folder through save_sae. Output::wrote lists the files.
analysis::Output<SaeOutcome> sae(analysis::StudyRun& run, const SaeRequest& request);

// Everything an SAE's folder holds once trained, written under the run's lock when the folder is the
// run's (`run` not empty): sae.safetensors, eval.json, features.json and features.html; then the run's
// report. Returns the paths written.
std::vector<std::string> save_sae(const std::string& run, const std::string& folder, const std::string& title,
                                  const SaeParams<float>& params,
                                  const std::map<std::string, std::string>& metadata,
                                  const findings::SaeEvalSummary& eval,
                                  const std::vector<findings::SaeFeature>& features,
                                  const std::string& run_name);

// The dictionary trainer's loop, shared by SAEs and transcoders: trains `trainer` to its config's steps on
// source(step) (a transcoder's source also fills the target), reporting to `progress` (when given) as a
// training of kind "sae" called `name`; checkpoints to `checkpoint` (when not empty) every
// checkpoint_every steps and at the end. When `stop` is set, it checkpoints at the current step and
// returns false; true when the config's steps are done. A loss that is not finite throws
// train::TrainingDiverged.
struct DictBatch {
  ag::Tensor<float> x, y;  // y undefined for an SAE
};
bool train_dictionary(SaeTrainer& trainer, const std::function<DictBatch(int64_t step)>& source,
                      const std::string& name, const std::string& checkpoint,
                      const std::map<std::string, std::string>& metadata, train::TrainObserver* progress,
                      const std::atomic<bool>* stop);
// The same loop for a cross-layer transcoder (dictionary/clt.h), whose batches hold every layer's columns.
bool train_dictionary(CltTrainer& trainer, const std::function<DictBatch(int64_t step)>& source,
                      const std::string& name, const std::string& checkpoint,
                      const std::map<std::string, std::string>& metadata, train::TrainObserver* progress,
                      const std::atomic<bool>* stop);

struct SaeSyntheticRequest {
  int64_t features = 256;      // true features
  int64_t dim = 32;            // their dimension
  double p = 0.02;             // each feature's probability of being active
  int64_t sae_features = 512;  // the SAE's features (at least `features`)
  uint64_t seed = 1;           // of the source and the SAE
  std::string config;          // SAE config file; "" = TopK, k 6, lr 0.003 (d_sae and seed from above)
  train::TrainObserver* progress = nullptr;  // the caller's
};

analysis::Output<findings::SaeSyntheticResult> sae_synthetic(const SaeSyntheticRequest& request);

}  // namespace dictionary
