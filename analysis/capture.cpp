#include "analysis/capture.h"

#include <algorithm>

#include "autograd/random.h"

namespace analysis {

std::vector<findings::Probe> capture_attention(const nn::CausalLM<float>& model, const train::Task& task,
                                               const train::Batch& batch, ag::Tensor<float>* logits) {
  ag::NoGradScope no_grad;
  nn::Hooks<float> hooks;
  const size_t L = static_cast<size_t>(model.shape.n_layers);
  for (size_t l = 0; l < L; ++l) hooks.capture(nn::hook_name(nn::Point::attn_pattern, l));
  ag::Tensor<float> out = model.forward(batch.inputs, batch.B, batch.T, {}, &hooks);
  if (logits) *logits = out;
  const int T = batch.T;
  std::vector<findings::Probe> probes(batch.B);
  for (int b = 0; b < batch.B; ++b) {
    findings::Probe& p = probes[b];
    for (int t = 0; t < T; ++t) {
      p.ids.push_back(batch.inputs[static_cast<size_t>(b) * T + t]);
      // An id the model has beyond the task's vocabulary is "<id N>", as analysis::token_label names it.
      const int32_t id = p.ids.back();
      p.tokens.push_back(id < task.vocab_size() ? task.token_name(id) : "<id " + std::to_string(id) + ">");
    }
    for (size_t l = 0; l < L; ++l) {
      const ag::Tensor<float>& pattern =
          hooks.captured(nn::hook_name(nn::Point::attn_pattern, l));  // (B, H, T, T)
      const int H = static_cast<int>(pattern.size(1));
      for (int h = 0; h < H; ++h) {
        findings::HeadMap m{static_cast<int>(l), h, findings::AttentionWeights(T, std::vector<float>(T))};
        const float* w = pattern.data() + (static_cast<int64_t>(b) * H + h) * T * T;
        for (int i = 0; i < T; ++i) std::copy(w + i * T, w + (i + 1) * T, m.weights[i].begin());
        p.maps.push_back(std::move(m));
      }
    }
  }
  return probes;
}

train::Batch repeated_random_batch(const train::Task& task, uint64_t seed, int n) {
  ag::Rng rng(seed ^ 0x1D0C7104ULL);
  const int T = task.seq_len();
  const int half = std::max(1, (T - 1) / 2);
  // Value tokens are the ones whose names parse as numbers; specials (BOS, SEP, ...) come first. A task
  // with its own token names (a sequence file, text) has no such split: every token but BOS.
  const std::optional<int> bos = task.bos_id();
  std::vector<int32_t> values;
  for (int id = 0; id < task.vocab_size(); ++id) {
    const std::string name = task.token_name(id);
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) values.push_back(id);
  }
  if (values.empty()) {
    for (int id = 0; id < task.vocab_size(); ++id)
      if (id != bos) values.push_back(id);
  }
  train::Batch out;
  out.B = n;
  out.T = T;
  for (int b = 0; b < n; ++b) {
    std::vector<int32_t> seq;
    if (bos) seq.push_back(*bos);
    std::vector<int32_t> first;
    for (int i = 0; i < half; ++i) first.push_back(values[rng.below(values.size())]);
    while (static_cast<int>(seq.size()) < T) seq.insert(seq.end(), first.begin(), first.end());
    seq.resize(T);
    out.inputs.insert(out.inputs.end(), seq.begin(), seq.end());
    out.targets.insert(out.targets.end(), T, -1);
  }
  return out;
}

}  // namespace analysis
