// The sizes and options of a CausalLM (nn/transformer.h). A run's config has this as its model section:
// train/config.h reads, checks and documents it field by field (train/config_schema.cpp's model table, which
// also spells each option in JSON), and the trainer builds the model from it as it stands.
//
// A model option is an enum here. Code that only has a shape (hook points, parameter counts, the lens's
// components) asks the constexpr facts below; code that has a model asks its modules (nn::Norm in
// nn/layers.h). A switch over an option has no default, so the compiler lists every place a new value
// must be handled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nn {

// The normalisation before attention, the MLP and the unembedding (ln1, ln2, ln_f), per row of d_model:
//   none   the identity;
//   layer  LayerNorm: (x - mean x) / sqrt(mean((x - mean x)^2) + eps) * weight + bias;
//   rms    RMSNorm: x / sqrt(mean(x^2) + eps) * weight (no centring, no bias; Llama's).
enum class NormKind { none, layer, rms };
// The MLP's nonlinearity, act in mlp(x) = fc2(act(fc1(x))), or a gated MLP's (up fc1, gate, down fc2):
//   gelu    GELU, its tanh approximation;
//   gelu_erf  GELU, exact (erf): GPT-NeoX/Pythia's and nanoGPT's "gelu";
//   relu    ReLU;
//   relu2   ReLU squared, relu(h)^2 (Primer; modded-nanogpt);
//   swiglu  gated: fc2(silu(gate(x)) * fc1(x)), silu(g) = g * sigmoid(g) (Llama's SwiGLU);
//   geglu   gated: fc2(gelu(gate(x)) * fc1(x)), GELU's tanh approximation.
enum class Activation { gelu, relu, relu2, swiglu, geglu, gelu_erf };

// Whether the MLP is gated: a third Linear `gate` (d_model -> d_ff) whose activation multiplies fc1's
// output; the mlp.gate hook point exists.
constexpr bool mlp_gated(Activation activation) {
  switch (activation) {
    case Activation::gelu:
    case Activation::gelu_erf:
    case Activation::relu:
    case Activation::relu2:
      return false;
    case Activation::swiglu:
    case Activation::geglu:
      return true;
  }
  return false;
}
// How attention knows positions:
//   learned  a learned embedding pos_emb (max_len, D) added to the token embedding (GPT-2's);
//   rotary   no position embedding: each head's queries and keys are rotated by their position after the
//            projection (RoPE, GPT-NeoX's "rotate_half" layout, on the first rotary_dims of each head);
//   none     no position information at all (NoPE): the causal mask is the only order the model sees.
enum class PositionKind { learned, rotary, none };
// What attention multiplies q k^T by before the softmax: 1 / sqrt(dk) (sqrt_dk, "Attention is all you
// need") or 1 (none: GPT-Neo's, whose logits grow with dk unless q and k stay small).
enum class AttnScale { sqrt_dk, none };

// Whether the model normalises at all: the ln*.scale and ln*.out hook points exist.
constexpr bool has_norm(NormKind kind) {
  switch (kind) {
    case NormKind::none:
      return false;
    case NormKind::layer:
      return true;
    case NormKind::rms:
      return true;
  }
  return false;
}
// Whether the norm subtracts each row's mean first, so that the stream's readers ignore its mean.
constexpr bool norm_centres(NormKind kind) {
  switch (kind) {
    case NormKind::none:
      return false;
    case NormKind::layer:
      return true;
    case NormKind::rms:
      return false;
  }
  return false;
}
// Whether the norm adds a bias after its weight (every norm but none has a weight).
constexpr bool norm_has_bias(NormKind kind) {
  switch (kind) {
    case NormKind::none:
      return false;
    case NormKind::layer:
      return true;
    case NormKind::rms:
      return false;
  }
  return false;
}

// Whether the model has the learned position embedding pos_emb.
constexpr bool has_pos_emb(PositionKind kind) {
  switch (kind) {
    case PositionKind::learned:
      return true;
    case PositionKind::rotary:
      return false;
    case PositionKind::none:
      return false;
  }
  return false;
}

struct ModelShape {
  int64_t vocab = 0;    // token ids 0..vocab-1 (a config's 0 = the task's vocabulary, resolved on loading)
  int64_t max_len = 0;  // positions (a config's 0 = the task's sequence length, resolved likewise)
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t n_layers = 2;
  int64_t d_ff = 256;
  bool attention_only = false;               // blocks without LN2 and MLP
  NormKind norm = NormKind::layer;           // ln1, ln2 and ln_f; none: each is the identity
  double norm_eps = 1e-5;                    // the eps of every norm (layer or rms) under its square root
  Activation activation = Activation::gelu;  // the MLP's
  bool bias = true;                          // false: no biases in the attention, MLP and unembedding linears
  bool qkv_bias = false;                     // Wq, Wk and Wv have biases even when bias is false (Qwen2's)
  PositionKind positions = PositionKind::learned;  // how attention knows positions
  double rotary_fraction = 1.0;                    // rotary: the fraction of each head's dims rotated
  double rotary_base = 10000;                 // rotary: pair i turns by base^(-2i / rotary_dims) a position
  AttnScale attn_scale = AttnScale::sqrt_dk;  // the factor on q k^T
  bool qk_norm = false;  // each head's q and k RMS-normalised (a learned weight per dk, shared by the heads)
  // The block's wiring, the unembedding and the logits (docs/architecture.md "Model"):
  bool parallel = false;  // attention and MLP both read the block's input, h + attn(ln1(h)) + mlp(ln2(h))
                          // (GPT-NeoX's two norms); false: the MLP reads resid_mid
  bool tie_embeddings = false;  // the unembedding is tok_emb's weight (lm_head.weight is tok_emb.weight)
  double logit_softcap = 0;     // > 0: logits = c * tanh(logits / c) (Gemma 2, modded-nanogpt); 0: off
  // Grouped-query attention: the key and value heads per layer; query head h reads kv head
  // h / (n_heads / n_kv_heads) (1: multi-query). 0 = n_heads (kv_heads below).
  int64_t n_kv_heads = 0;
  // Local attention: query t sees keys in (t - window, t]; 0 = every earlier key. Empty: global everywhere;
  // one value: every layer's; else one per layer (GPT-Neo's alternating global and local layers).
  std::vector<int64_t> attn_window{};
};

// The key and value heads of each layer: n_kv_heads, or n_heads where it is 0.
inline int64_t kv_heads(const ModelShape& s) {
  return s.n_kv_heads > 0 ? s.n_kv_heads : s.n_heads;
}
// Layer `layer`'s attention window (0: global).
inline int64_t attn_window(const ModelShape& s, std::size_t layer) {
  if (s.attn_window.empty()) return 0;
  return s.attn_window.size() == 1      ? s.attn_window[0]
         : layer < s.attn_window.size() ? s.attn_window[layer]
                                        : 0;
}

// rotary: the dims of each head that are rotated, the first rotary_fraction * dk (rounded down; the config
// requires an even number >= 2); 0 for the other position kinds.
inline int64_t rotary_dims(const ModelShape& s) {
  return s.positions == PositionKind::rotary && s.n_heads > 0
             ? static_cast<int64_t>(s.rotary_fraction * static_cast<double>(s.d_model / s.n_heads))
             : 0;
}

}  // namespace nn
