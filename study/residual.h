// Reading the residual stream (docs/residual.md): the logit lens on the accumulated residual stream and the
// decomposition of the final residual into the components that wrote it, both for the metric
//   m(t) = u . logits[t],  u = e_answer - e_wrong, or e_answer - 1/V (the answer's logit minus the mean)
// at every position t. ln_f is applied as the actual forward applies it at t: centre, times the forward's
// ln_f.scale[t], times ln_f.weight (plus ln_f.bias where the whole stream is read). With g(t) =
// ln_f.scale[t] * ln_f.weight * (W_U^T u), centred over d_model (the centring moved onto g), a vector x
// written to the stream at t contributes x . g_c(t):
//   accumulated(point, t) = x_point[t] . g_c(t) + ln_f.bias . W_U^T u + lm_head.bias . u
//   component(c, t)       = c[t] . g_c(t);  ln_f.bias and lm_head.bias are terms of their own
// The components (embed, pos_embed, each head's z_h W_O^h, each layer's attention bias, each MLP's output)
// sum to the last resid_post, so they and the bias terms sum to m(t), as does the last accumulated value.
// The activations come from one reference forward (nn/hooks.h); the arithmetic is in double. With
// model.logit_softcap, logits means the logits before the cap (the cap is not linear).
#pragma once

#include <vector>

#include "findings/lens_view.h"
#include "nn/transformer.h"

namespace study {

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

}  // namespace study
