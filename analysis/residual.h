// Reading the residual stream (docs/residual.md): the logit lens on the accumulated residual stream and the
// decomposition of the final residual into the components that wrote it, both for the metric
//   m(t) = u . logits[t],  u = e_answer - e_wrong, or e_answer - 1/V (the answer's logit minus the mean)
// at every position t. ln_f is applied as the actual forward applies it at t: centre, times the forward's
// ln_f.scale[t], times ln_f.weight (plus ln_f.bias where the whole stream is read). With g(t) =
// ln_f.scale[t] * ln_f.weight * (W_U^T u), centred over d_model (the centring moved onto g), a vector x
// written to the stream at t contributes x . g_c(t):
//   accumulated(point, t) = x_point[t] . g_c(t) + ln_f.bias . W_U^T u + lm_head.bias . u
//   component(c, t)       = c[t] . g_c(t);  ln_f.bias and lm_head.bias are terms of their own
// The components (embed, pos_embed (learned positions only), each head's z_h W_O^h, each layer's attention
// bias, each MLP's output) sum to the last resid_post, so they and the bias terms sum to m(t), as does the
// last accumulated value. The activations come from one reference forward (nn/hooks.h); the arithmetic is in
// double. With model.logit_softcap, logits means the logits before the cap (the cap is not linear).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "findings/lens_view.h"
#include "nn/transformer.h"

namespace analysis {

// Lens and decomposition of `ids` (one sequence) for the metric above; wrong = -1 for the mean. Throws
// std::invalid_argument (one line) for an empty or too long input, a token outside the vocabulary, or
// answer == wrong. Token labels are left for the caller.
template <typename T>
findings::LensResult logit_lens(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int answer,
                                int wrong);

// The components' names in forward order, as the lens names them: embed, pos_embed, then per layer
// blocks.L.attn.head.H for each head, blocks.L.attn.bias and (with MLPs) blocks.L.mlp, then ln_f.bias and
// lm_head.bias.
std::vector<std::string> lens_component_names(const nn::ModelShape& shape);

// TransformerLens's ActivationCache helpers, on the activations of one forward of any batch (B, T): the
// pieces of the residual stream as a stack (n, B, T, D) in double with one label per row, the final norm
// applied to a stack, and a stack's direct logit attribution. Each reads only the points it names through
// `cache` (the value at a hook point, as nn::Hooks captures it; the lookup throws for a point it lacks). A
// layer is 0..n_layers; n_layers means every block and the final residual. Bad arguments are
// std::invalid_argument naming them ("layer: ...").
template <typename T>
using CacheLookup = std::function<ag::Tensor<T>(const std::string& point)>;

struct ResidualStack {
  std::vector<std::string> labels;
  ag::Tensor<double> stack;  // (n, B, T, D)
};

// blocks.l.resid_pre for l = 0..layer ("l_pre"), with incl_mid resid_mid after each but layer's ("l_mid")
// and with mlp_input layer's too; layer n_layers ends with the last resid_post ("final_post").
template <typename T>
ResidualStack accumulated_resid(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer,
                                bool incl_mid, bool mlp_input);

// What wrote the stream up to `layer`: embed and pos_embed (incl_embeds), then per block l < layer its
// attn.out ("l_attn_out", mode "all" or "attn") and mlp.out ("l_mlp_out", mode "all" or "mlp"; not in
// attention-only models), and with mlp_input layer's attn.out. These sum to blocks.layer.resid_pre (the last
// resid_post for n_layers; plus layer's attn.out, resid_mid, with mlp_input).
template <typename T>
ResidualStack decompose_resid(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer,
                              bool mlp_input, const std::string& mode, bool incl_embeds);

// Each head's write into the stream, z_h Wo_h^T, for the blocks before `layer` ("LlHh", layer by layer),
// from blocks.l.attn.z; Wo's bias is not in any head (decompose_resid's attn.out holds it).
template <typename T>
ResidualStack stack_head_results(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer);

// A stack (..., B, T, D) through a norm as the forward applied it, without its bias: centred (when the norm
// centres), times the cached scale at (b, t), times the norm's weight (TransformerLens folds the weight into
// the next matrix; attograd's models keep it). The norm is ln_f for layer n_layers, else block layer's ln1
// (ln2 with mlp_input). A model without norms gives the stack unchanged.
template <typename T>
ag::Tensor<double> apply_ln_to_stack(const nn::CausalLM<T>& model, const CacheLookup<T>& cache,
                                     const ag::Tensor<double>& stack, int layer, bool mlp_input);

// stack (..., D) . (W_U[token] - W_U[incorrect]) (W_U[token] alone for incorrect = -1): shape (...). On
// apply_ln_to_stack's output this is each piece's share of logit[token] - logit[incorrect], the biases of
// ln_f and the unembedding aside.
template <typename T>
ag::Tensor<double> logit_attrs(const nn::CausalLM<T>& model, const ag::Tensor<double>& stack, int token,
                               int incorrect);

}  // namespace analysis
