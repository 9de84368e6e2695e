#include "nn/model_copy.h"

#include "nn/init.h"

namespace nn {

std::unique_ptr<CausalLM<double>> float64_copy(const CausalLM<float>& model) {
  auto out = std::make_unique<CausalLM<double>>(model.shape, allocate_only());
  const auto from = model.named_parameters();
  const auto to = out->named_parameters();
  for (size_t i = 0; i < from.size(); ++i) {
    const float* src = from[i].tensor->data();
    double* dst = to[i].tensor->data();
    for (int64_t j = 0; j < from[i].tensor->numel(); ++j) dst[j] = src[j];
  }
  return out;
}

}  // namespace nn
