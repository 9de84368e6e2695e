#include "train/model_factory.h"

#include "nn/init.h"

namespace train {

template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model(const Config& config) {
  ag::Rng rng(config.seed);
  return std::make_unique<nn::CausalLM<T>>(config.model, rng);
}

template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model_to_load(const Config& config) {
  return std::make_unique<nn::CausalLM<T>>(config.model, nn::allocate_only());
}

template std::unique_ptr<nn::CausalLM<float>> make_model<float>(const Config&);
template std::unique_ptr<nn::CausalLM<double>> make_model<double>(const Config&);
template std::unique_ptr<nn::CausalLM<float>> make_model_to_load<float>(const Config&);
template std::unique_ptr<nn::CausalLM<double>> make_model_to_load<double>(const Config&);

}  // namespace train
