// `attograd transcoder` as a library call: per-layer transcoders, each reading an MLP's input (the
// normalised resid_mid the MLP reads: blocks.L.ln2.out, or blocks.L.resid_mid in a model without norms)
// and writing its output (blocks.L.mlp.out), trained on the run's own activations by the dictionary
// trainer (dictionary/sae.h: the SAE config table, activation normalisation, checkpoints, Ctrl-C, resume),
// and evaluated as SAELens evaluates transcoders: explained variance of the MLP's output, L0, dead features,
// and the cross-entropy recovered with every MLP replaced by its transcoder at once. The files are
// io/run_layout.h's transcoders_* (docs/graphs.md).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "dictionary/sae.h"
#include "findings/sae_view.h"
#include "findings/transcoder_view.h"
#include "train/trainer.h"

namespace dictionary {

struct TranscoderRequest {
  std::string layers;   // "0,1": the layers to train; "" = every layer with an MLP
  std::string config;   // SAE config file (docs/sae.md; `skip` adds W_skip); "" = every field's default
  std::string out;      // the transcoders' folder; "" = RUN/transcoders
  bool resume = false;  // continue each layer from its checkpoint, with the checkpoint's own config
  // One cross-layer transcoder over every layer (dictionary/clt.h) instead of per-layer ones; layers empty.
  bool cross_layer = false;
  train::TrainObserver* progress = nullptr;  // the caller's (not the request table's)
  const std::atomic<bool>* stop = nullptr;   // Ctrl-C: checkpoint the current layer and return
};

// What `transcoder` did: when stopped, the layer being trained was checkpointed at `steps` and `eval` is
// empty.
struct TranscoderOutcome {
  findings::TranscoderEval eval;
  int64_t steps = 0;
  int stopped_layer = -1;  // the layer stopped in; -1 when every layer finished
};

analysis::Output<TranscoderOutcome> transcoder(analysis::StudyRun& run, const TranscoderRequest& request);

// The point layer L's transcoder reads in `model`: its MLP's input (blocks.L.ln2.out, or without norms the
// stream point the MLP reads: resid_mid, or resid_pre in a parallel block).
std::string transcoder_in_point(const nn::CausalLM<float>& model, int layer);

// A folder's transcoders (DIR/L/transcoder.safetensors), one per layer of `model`: every layer with an
// MLP must have one whose shape fits it (d_in = d_out = d_model), all per-layer or all the layers of one
// cross-layer transcoder (layer L's writing to the n_layers - L MLP outputs from its own). Errors are one
// line naming the file.
std::vector<SaeParams<float>> load_transcoders(const nn::CausalLM<float>& model, const std::string& folder);

// Evaluates `transcoders` (one per layer, per-layer or cross-layer; an undefined W_enc leaves that layer's
// MLP in place) on
// `held_out`: each layer on the clean model's activations, and the CE with every MLP replaced at once
// (and every MLP's output zeroed, the baseline), at the kept tokens (skip_bos as in training).
findings::TranscoderEval evaluate_transcoders(const nn::CausalLM<float>& model,
                                              const std::vector<SaeParams<float>>& transcoders,
                                              const SaeConfig& config, const train::Batch& held_out);

// Each layer's feature pages' data (one SaeFeature per feature, as an SAE's features.json): its density
// and top config.top_examples examples on `held_out` (the strongest token of each sequence, its activation
// at every token), and the logit effects of its decoder direction through ln_f's weight and the
// unembedding (a cross-layer feature's: the sum of its rows into every MLP output it writes, all it
// writes to the residual stream). Empty for a layer without a transcoder.
std::vector<std::vector<findings::SaeFeature>> transcoder_features(
    const nn::CausalLM<float>& model, const train::Task& task,
    const std::vector<SaeParams<float>>& transcoders, const SaeConfig& config, const train::Batch& held_out,
    int top_tokens = 5);

}  // namespace dictionary
