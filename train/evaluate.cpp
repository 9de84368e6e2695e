#include "train/evaluate.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace train {

double exact_match_accuracy(const std::vector<int32_t>& predictions, const Batch& batch) {
  const size_t cells = static_cast<size_t>(batch.B) * batch.T;
  if (predictions.size() != cells || batch.targets.size() != cells) {
    throw std::invalid_argument("exact_match_accuracy: expected " + std::to_string(cells) +
                                " predictions and targets, got " + std::to_string(predictions.size()) +
                                " and " + std::to_string(batch.targets.size()));
  }
  if (batch.B == 0) return 0.0;
  int correct = 0;
  for (int b = 0; b < batch.B; ++b) {
    bool all_right = true;
    for (int t = 0; t < batch.T && all_right; ++t) {
      const size_t i = static_cast<size_t>(b) * batch.T + t;
      if (batch.targets[i] >= 0 && predictions[i] != batch.targets[i]) all_right = false;
    }
    correct += all_right;
  }
  return static_cast<double>(correct) / batch.B;
}

Batch take_sequences(const Batch& batch, int n) {
  Batch out;
  out.B = std::min(n, batch.B);
  out.T = batch.T;
  const size_t len = static_cast<size_t>(out.B) * out.T;
  out.inputs.assign(batch.inputs.begin(), batch.inputs.begin() + len);
  out.targets.assign(batch.targets.begin(), batch.targets.begin() + len);
  return out;
}

EvalResult evaluate(const nn::CausalLM<float>& model, const Batch& batch, int chunk,
                    nn::Hooks<float>* hooks) {
  ag::NoGradScope no_grad;
  const int64_t T = batch.T, V = model.shape.vocab;
  std::vector<int32_t> predictions(batch.inputs.size());
  double loss_sum = 0;
  int64_t scored = 0;
  for (int start = 0; start < batch.B; start += chunk) {
    const int b = std::min(chunk, batch.B - start);
    const auto begin = static_cast<size_t>(start) * T, end = begin + static_cast<size_t>(b) * T;
    const std::vector<int32_t> ids(batch.inputs.begin() + begin, batch.inputs.begin() + end);
    const std::vector<int32_t> targets(batch.targets.begin() + begin, batch.targets.begin() + end);
    ag::Tensor<float> logits = model.forward(ids, b, T, {}, hooks);  // (b, T, V)
    const int64_t n = std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; });
    if (n > 0) loss_sum += static_cast<double>(ag::cross_entropy(logits, targets, -1).item()) * n;
    scored += n;
    ag::ConstMatMap<float> rows(logits.data(), static_cast<int64_t>(b) * T, V);
    for (int64_t r = 0; r < rows.rows(); ++r) {
      Eigen::Index arg;
      rows.row(r).maxCoeff(&arg);
      predictions[begin + r] = static_cast<int32_t>(arg);
    }
  }
  return {exact_match_accuracy(predictions, batch), scored ? loss_sum / scored : 0.0, batch.B};
}

}  // namespace train
