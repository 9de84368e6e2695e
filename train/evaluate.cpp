#include "train/evaluate.h"

#include <algorithm>

namespace train {

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
