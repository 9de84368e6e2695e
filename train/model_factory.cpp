#include "train/model_factory.h"

namespace train {

template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model(const Config& config) {
  ag::Rng rng(config.seed);
  return std::make_unique<nn::CausalLM<T>>(config.model, rng);
}

template std::unique_ptr<nn::CausalLM<float>> make_model<float>(const Config&);
template std::unique_ptr<nn::CausalLM<double>> make_model<double>(const Config&);

}  // namespace train
