// Held-out evaluation: exact-match accuracy and mean loss on scored positions, in no-grad chunks.
#pragma once

#include "nn/transformer.h"
#include "train/tasks.h"

namespace train {

struct EvalResult {
  double acc = 0;   // fraction of sequences whose scored tokens are all right
  double loss = 0;  // mean cross-entropy over scored positions
  int n = 0;        // sequences
};

// hooks: optional activation hooks for every chunk's forward (e.g. an ablation's patches).
EvalResult evaluate(const nn::CausalLM<float>& model, const Batch& batch, int chunk = 256,
                    nn::Hooks<float>* hooks = nullptr);

// The fraction of the batch's sequences whose scored tokens are all predicted right; `predictions` holds
// the argmax token for each of the B*T positions.
double exact_match_accuracy(const std::vector<int32_t>& predictions, const Batch& batch);

// The first n sequences of a batch, as their own batch.
Batch take_sequences(const Batch& batch, int n);

}  // namespace train
