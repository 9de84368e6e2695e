#include "train/model_factory.h"

namespace train {

nn::ModelShape model_shape(const Config& c) {
  nn::ModelShape s;
  s.vocab = c.model.vocab;
  s.max_len = c.model.max_len;
  s.d_model = c.model.d_model;
  s.n_heads = c.model.n_heads;
  s.n_layers = c.model.n_layers;
  s.d_ff = c.model.d_ff;
  s.attention_only = c.model.attention_only;
  return s;
}

template <typename T>
std::unique_ptr<nn::CausalLM<T>> make_model(const Config& config) {
  ag::Rng rng(config.seed);
  return std::make_unique<nn::CausalLM<T>>(model_shape(config), rng);
}

template std::unique_ptr<nn::CausalLM<float>> make_model<float>(const Config&);
template std::unique_ptr<nn::CausalLM<double>> make_model<double>(const Config&);

}  // namespace train
