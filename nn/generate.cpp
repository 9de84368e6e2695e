#include "nn/generate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/gemm.h"

namespace nn {

void check_sampling_options(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    throw std::invalid_argument("temperature " + std::to_string(o.temperature) +
                                ": must be a finite number >= 0 (0 = greedy)");
  if (o.top_k < 0)
    throw std::invalid_argument("top_k " + std::to_string(o.top_k) + ": must be >= 0 (0 = all tokens)");
}

template <typename T>
int32_t sample_token(const T* logits, int64_t vocab, const SamplingOptions& o, ag::Rng& rng) {
  check_sampling_options(o);
  if (vocab < 1) throw std::invalid_argument("sample_token: no logits");
  for (int64_t i = 0; i < vocab; ++i)
    if (!std::isfinite(logits[i]))
      throw std::invalid_argument("sample_token: logit " + std::to_string(i) + " is " +
                                  std::to_string(logits[i]) + ", not a finite number");
  if (o.temperature == 0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);

  // The candidates: every id, or the top_k largest logits (ties to the lower id), largest first.
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const auto larger = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int64_t k = vocab;
  if (o.top_k > 0 && o.top_k < vocab) {
    k = o.top_k;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), larger);
  }
  // softmax(logits / temperature) over the candidates, in double, from their largest logit.
  T top = logits[ids[0]];
  for (int64_t i = 1; i < k; ++i) top = std::max(top, logits[ids[i]]);
  std::vector<double> weights(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = std::exp((static_cast<double>(logits[ids[i]]) - static_cast<double>(top)) / o.temperature);
    total += weights[i];
  }
  // One uniform draw, walked through the cumulative weights; total >= 1 (the largest weighs exp(0)).
  const double u = rng.uniform() * total;
  double cumulative = 0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < k; ++i) {
    if (weights[i] <= 0) continue;
    last_positive = i;
    cumulative += weights[i];
    if (u < cumulative) return ids[i];
  }
  return ids[last_positive];  // u within rounding of total
}

const char* stop_reason_name(StopReason reason) {
  return reason == StopReason::max_len ? "max_len" : "max_new";
}

namespace {

// Decoding reads every weight matrix from memory once per token; their packed copies (ag::PackedWeights)
// stream faster, with the same bits. They cost one more pass over the weights and a second copy of them
// while generating, so they are made only while the copy takes at most a quarter of the machine's memory,
// and when there are enough one-token steps ahead to repay the pass: kPackMinSteps, or kPackMinStepsLarge
// for a copy of more than kPackSmallBytes, which lands in fresh pages whose first touch costs as much as
// dozens of steps gain.
constexpr int64_t kPackMinSteps = 8;
constexpr int64_t kPackMinStepsLarge = 64;
constexpr int64_t kPackSmallBytes = int64_t(32) << 20;

template <typename T>
std::vector<const ag::Tensor<T>*> decoding_weights(const CausalLM<T>& model) {
  std::vector<const ag::Tensor<T>*> weights;
  for (const auto& block : model.blocks) {
    const MultiHeadAttention<T>& a = block->attn;
    for (const Linear<T>* linear : {&a.wq, &a.wk, &a.wv, &a.wo}) weights.push_back(&linear->weight);
    if (block->mlp) {
      weights.push_back(&block->mlp->fc1.weight);
      if (block->mlp->gate) weights.push_back(&block->mlp->gate->weight);
      weights.push_back(&block->mlp->fc2.weight);
    }
  }
  weights.push_back(&model.lm_head.weight);
  return weights;
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

// The packed weights for a generation of `steps` one-token steps, or none when not worth their cost.
template <typename T>
std::unique_ptr<ag::PackedWeights<T>> pack_for_decoding(const CausalLM<T>& model, int64_t steps) {
  if (steps < kPackMinSteps) return nullptr;
  const std::vector<const ag::Tensor<T>*> weights = decoding_weights(model);
  int64_t bytes = 0;
  for (const ag::Tensor<T>* w : weights) bytes += ag::PackedWeights<T>::bytes_of(w->size(0), w->size(1));
  if (bytes > physical_memory_bytes() / 4 || (bytes > kPackSmallBytes && steps < kPackMinStepsLarge))
    return nullptr;
  auto packed = std::make_unique<ag::PackedWeights<T>>();
  for (const ag::Tensor<T>* w : weights) packed->add(w->data(), w->size(0), w->size(1));
  return packed;
}

}  // namespace

template <typename T>
Generation generate(const CausalLM<T>& model, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  check_sampling_options(o.sampling);
  const int64_t max_len = model.shape.max_len, V = model.shape.vocab;
  const int64_t P = static_cast<int64_t>(prompt.size());
  if (P < 1) throw std::invalid_argument("generate: empty prompt");
  if (P > max_len)
    throw std::invalid_argument("generate: a prompt of " + std::to_string(P) +
                                " tokens, but the model reads at most max_len " + std::to_string(max_len));
  ag::NoGradScope no_grad;
  ag::Rng rng(o.seed);
  Generation g;
  std::vector<int32_t> sequence = prompt;  // the tokens read so far (uncached path)
  KVCache<T> cache(model.shape);
  // One-token steps ahead: max_new - 1 after the prompt's forward, or until the model has read max_len.
  const int64_t steps = o.max_new >= 0 ? std::min(o.max_new - 1, max_len - P) : max_len - P;
  const std::unique_ptr<ag::PackedWeights<T>> packed =
      o.use_cache ? pack_for_decoding(model, steps) : nullptr;
  const ag::UsePackedWeights<T> use_packed(packed.get());
  // The logits of the last position read.
  ag::Tensor<T> logits = o.use_cache ? model.forward_cached(prompt, cache) : model.forward(prompt, 1, P);
  int64_t row = P - 1;
  while (true) {
    if (o.max_new >= 0 && static_cast<int64_t>(g.ids.size()) >= o.max_new) {
      g.stopped = StopReason::max_new;
      break;
    }
    const int32_t next = sample_token(logits.data() + row * V, V, o.sampling, rng);
    g.ids.push_back(next);
    if (o.max_new >= 0 && static_cast<int64_t>(g.ids.size()) >= o.max_new) {
      g.stopped = StopReason::max_new;
      break;
    }
    const int64_t read = P + static_cast<int64_t>(g.ids.size()) - 1;
    if (read >= max_len && o.max_new < 0) {
      g.stopped = StopReason::max_len;
      break;
    }
    if (read >= max_len) {
      // The window is full: the context slides to the last max_len tokens, read afresh (positions start
      // at 0 again, so no cached key survives), as nanoGPT's generate crops to its block size.
      sequence.assign(prompt.begin(), prompt.end());
      sequence.insert(sequence.end(), g.ids.begin(), g.ids.end());
      const std::vector<int32_t> window(sequence.end() - max_len, sequence.end());
      if (o.use_cache) {
        cache.clear();
        logits = model.forward_cached(window, cache);
      } else {
        logits = model.forward(window, 1, max_len);
      }
      row = max_len - 1;
    } else if (o.use_cache) {
      logits = model.forward_cached({next}, cache);
      row = 0;
    } else {
      sequence.push_back(next);
      logits = model.forward(sequence, 1, read + 1);
      row = read;
    }
  }
  return g;
}

template int32_t sample_token<float>(const float*, int64_t, const SamplingOptions&, ag::Rng&);
template int32_t sample_token<double>(const double*, int64_t, const SamplingOptions&, ag::Rng&);
template Generation generate<float>(const CausalLM<float>&, const std::vector<int32_t>&,
                                    const GenerateOptions&);
template Generation generate<double>(const CausalLM<double>&, const std::vector<int32_t>&,
                                     const GenerateOptions&);

}  // namespace nn
