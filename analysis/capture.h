// Attention maps of real inputs, read from the model through its activation hooks (blocks.L.attn.pattern)
// and turned into plain data (findings/attention_maps.h) for scores, dumps and pictures; and the
// repeated-random inputs the induction score needs.
#pragma once

#include <vector>

#include "findings/attention_maps.h"
#include "nn/transformer.h"
#include "train/tasks.h"

namespace analysis {

// Every layer's and head's weights on each sequence of `batch`, with the task's token names; the same
// forward pass's logits (B, T, V) go to `logits` when it is given.
std::vector<findings::Probe> capture_attention(const nn::CausalLM<float>& model, const train::Task& task,
                                               const train::Batch& batch,
                                               ag::Tensor<float>* logits = nullptr);

// Repeated random sequences over the task's value tokens (BOS, r1..rm, r1..rm, cut to T) for the induction
// score: the pattern only shows where a token repeats, which most tasks' inputs never do.
train::Batch repeated_random_batch(const train::Task& task, uint64_t seed, int n);

}  // namespace analysis
