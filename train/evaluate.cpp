#include "train/evaluate.h"

#include <algorithm>

namespace ag {

Batch take_sequences(const Batch& batch, int n) {
  Batch out;
  out.B = std::min(n, batch.B);
  out.T = batch.T;
  const size_t len = static_cast<size_t>(out.B) * out.T;
  out.inputs.assign(batch.inputs.begin(), batch.inputs.begin() + len);
  out.targets.assign(batch.targets.begin(), batch.targets.begin() + len);
  return out;
}

EvalResult evaluate(nn::CausalLM<float>& model, const Batch& batch, int chunk) {
  NoGradScope no_grad;
  const int64_t T = batch.T, V = model.shape.vocab;
  std::vector<int32_t> predictions(batch.inputs.size());
  double loss_sum = 0;
  int64_t scored = 0;
  for (int start = 0; start < batch.B; start += chunk) {
    const int b = std::min(chunk, batch.B - start);
    const auto begin = static_cast<size_t>(start) * T, end = begin + static_cast<size_t>(b) * T;
    const std::vector<int32_t> ids(batch.inputs.begin() + begin, batch.inputs.begin() + end);
    const std::vector<int32_t> targets(batch.targets.begin() + begin, batch.targets.begin() + end);
    Tensor<float> logits = model.forward(ids, b, T);  // (b, T, V)
    const int64_t n = std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; });
    if (n > 0) loss_sum += static_cast<double>(cross_entropy(logits, targets, -1).item()) * n;
    scored += n;
    ConstMatMap<float> rows(logits.data(), static_cast<int64_t>(b) * T, V);
    for (int64_t r = 0; r < rows.rows(); ++r) {
      Eigen::Index arg;
      rows.row(r).maxCoeff(&arg);
      predictions[begin + r] = static_cast<int32_t>(arg);
    }
  }
  return {exact_match_accuracy(predictions, batch), scored ? loss_sum / scored : 0.0, batch.B};
}

std::vector<Probe> capture_attention(nn::CausalLM<float>& model, const Task& task, const Batch& batch,
                                     Tensor<float>* logits) {
  NoGradScope no_grad;
  model.set_keep_attention(true);
  Tensor<float> out = model.forward(batch.inputs, batch.B, batch.T);
  if (logits) *logits = out;
  const std::vector<Tensor<float>> layers = model.attention_weights();  // each (B, H, T, T)
  model.set_keep_attention(false);
  const int T = batch.T;
  std::vector<Probe> probes(batch.B);
  for (int b = 0; b < batch.B; ++b) {
    Probe& p = probes[b];
    for (int t = 0; t < T; ++t) {
      p.ids.push_back(batch.inputs[static_cast<size_t>(b) * T + t]);
      p.tokens.push_back(task.token_name(p.ids.back()));
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      const int H = static_cast<int>(layers[l].size(1));
      for (int h = 0; h < H; ++h) {
        HeadMap m{static_cast<int>(l), h, AttentionWeights(T, std::vector<float>(T))};
        const float* w = layers[l].data() + (static_cast<int64_t>(b) * H + h) * T * T;
        for (int i = 0; i < T; ++i) std::copy(w + i * T, w + (i + 1) * T, m.weights[i].begin());
        p.maps.push_back(std::move(m));
      }
    }
  }
  return probes;
}

Batch repeated_random_batch(const Task& task, uint64_t seed, int n) {
  Rng rng(seed ^ 0x1D0C7104ULL);
  const int T = task.seq_len();
  const int half = std::max(1, (T - 1) / 2);
  // Value tokens are the ones whose names parse as numbers; specials (BOS, SEP, ...) come first.
  std::vector<int32_t> values;
  for (int id = 0; id < task.vocab_size(); ++id) {
    const std::string name = task.token_name(id);
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) values.push_back(id);
  }
  const std::optional<int> bos = task.token_id("BOS");
  Batch out;
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

}  // namespace ag
