// The sizes of a CausalLM (nn/transformer.h). A run's config has this as its model section: train/config.h
// reads, checks and documents it field by field (train/config_schema.cpp's model table), and the trainer
// builds the model from it as it stands.
#pragma once

#include <cstdint>
#include <string>

namespace nn {

struct ModelShape {
  int64_t vocab = 0;    // token ids 0..vocab-1 (a config's 0 = the task's vocabulary, resolved on loading)
  int64_t max_len = 0;  // positions (a config's 0 = the task's sequence length, resolved likewise)
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t n_layers = 2;
  int64_t d_ff = 256;
  bool attention_only = false;      // blocks without LN2 and MLP
  bool layer_norm = true;           // false: no ln1, ln2 or ln_f anywhere (each is the identity)
  std::string activation = "gelu";  // the MLP's: "gelu" (tanh approximation) or "relu"
  bool bias = true;                 // false: no biases in the attention, MLP and unembedding linears
};

}  // namespace nn
