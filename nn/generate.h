// Autoregressive sampling from a CausalLM: a prompt's continuation a token at a time, each token drawn
// from the logits of the last position read, then read in turn. With the key/value cache (nn/kv_cache.h)
// each new token costs one position's forward; without it (use_cache = false, for comparison and tests)
// each costs a full forward over the whole sequence so far. Both give the same tokens wherever the cached
// logits are the full forward's to the bit (CausalLM::forward_cached says when), and otherwise unless two
// logits tie to within float rounding. A cached generation of enough one-token steps (8, or 64 for a model
// of more than 32 MB of weights) reads the weight matrices from packed copies (ag::PackedWeights, made when
// it starts and freed when it ends): more tokens per second with the same bits, for a second copy of the
// matrices while it runs, made only while that copy fits in a quarter of the machine's memory.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/random.h"
#include "nn/transformer.h"

namespace nn {

struct SamplingOptions {
  // 0: greedy (the argmax, the lowest id among equal logits); otherwise a draw from
  // softmax(logits / temperature). Must be finite and >= 0.
  double temperature = 1.0;
  // Draw among the top_k largest logits only (the lowest ids first among equal ones); 0, or >= the
  // vocabulary, for all of them. Must be >= 0.
  int64_t top_k = 0;
};

// Throws std::invalid_argument naming the field when the options are out of range.
void check_sampling_options(const SamplingOptions& options);

// The next token from one row of `vocab` logits, drawing from `rng` (one uniform draw when sampling,
// none when greedy). Throws std::invalid_argument for a logit that is NaN or infinite.
template <typename T>
int32_t sample_token(const T* logits, int64_t vocab, const SamplingOptions& options, ag::Rng& rng);

struct GenerateOptions {
  // The most tokens to generate; < 0: until the model has read max_len tokens. With max_new set, past
  // max_len the context slides to the last max_len tokens (a full forward per token from there).
  int64_t max_new = -1;
  SamplingOptions sampling;
  uint64_t seed = 0;      // of the ag::Rng the draws come from: the same seed, the same tokens
  bool use_cache = true;  // false: a full forward per token (the uncached reference)
};

enum class StopReason {
  max_new,  // generated max_new tokens
  max_len,  // the model has read max_len tokens: the logits of the last position gave the last token
};
const char* stop_reason_name(StopReason reason);  // "max_new", "max_len"

struct Generation {
  std::vector<int32_t> ids;  // the generated tokens, after the prompt
  StopReason stopped = StopReason::max_new;
};

// Continues `prompt` (1 .. max_len ids). The model reads at most max_len tokens: without max_new the prompt
// and the generated tokens together are at most max_len + 1 (the last one is drawn from the logits of
// position max_len - 1 and never read); with max_new, each token past that is drawn from the last max_len
// tokens read afresh (the context window slides). Throws std::invalid_argument for an empty or too long
// prompt, an id outside the vocabulary or bad sampling options.
template <typename T>
Generation generate(const CausalLM<T>& model, const std::vector<int32_t>& prompt,
                    const GenerateOptions& options);

}  // namespace nn
