// Held-out evaluation: exact-match accuracy and mean loss on scored positions, in no-grad chunks; and the
// attention maps of probe inputs, captured from the model's forward pass as plain data for the study tools.
#pragma once

#include "nn/transformer.h"
#include "train/attention_maps.h"
#include "train/tasks.h"

namespace ag {

struct EvalResult {
  double acc = 0;   // fraction of sequences whose scored tokens are all right
  double loss = 0;  // mean cross-entropy over scored positions
  int n = 0;        // sequences
};

EvalResult evaluate(nn::CausalLM<float>& model, const Batch& batch, int chunk = 256);

// The first n sequences of a batch, as their own batch.
Batch take_sequences(const Batch& batch, int n);

// Every layer's and head's weights on each sequence of `batch`, with the task's token names; the same
// forward pass's logits (B, T, V) go to `logits` when it is given.
std::vector<Probe> capture_attention(nn::CausalLM<float>& model, const Task& task, const Batch& batch,
                                     Tensor<float>* logits = nullptr);

// Repeated random sequences over the task's value tokens (BOS, r1..rm, r1..rm, cut to T) for the induction
// score: the pattern only shows where a token repeats, which most tasks' inputs never do.
Batch repeated_random_batch(const Task& task, uint64_t seed, int n);

}  // namespace ag
