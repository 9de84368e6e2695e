// Weight processing as TransformerLens does it by default (fold_ln, center_writing_weights,
// center_unembed), on a copy of the model:
//   - fold each norm's weight w and bias b into the Linear that reads it (ln1 into wq, wk, wv; ln2 into
//     fc1 and a gated MLP's gate; ln_f into lm_head): W' = W diag(w), bias' = bias + W b (RMSNorm has no b),
//     then, when the norm centres (LayerNorm; RMSNorm does not), centre each row of W' over its inputs (the
//     normalised input has zero mean, so a constant per row reads nothing); the norm keeps weight 1 and bias
//     0;
//   - when the norms centre, centre every weight that writes to the residual stream over d_model: tok_emb
//     and pos_emb rows, wo's and fc2's columns and their biases (every reader of the stream is a norm that
//     removes the mean; without one the stream's mean is read, and the writers stay as they are);
//   - centre the unembedding over the vocabulary: lm_head.weight's columns and its bias (softmax ignores a
//     constant added to every logit), unless model.logit_softcap caps the logits (tanh is not
//     shift-invariant: the unembedding stays as it is).
// A model with tie_embeddings gives an untied copy (lm_head.weight a copy of tok_emb.weight), as the fold
// and the centring treat the two differently; a parallel block's ln2 folds into fc1 as any other.
// The processed model gives the same log-probabilities (to float rounding; the logits differ by a constant
// per position), and its weights read more directly: a head's W_Q^h already holds ln1's weight, a
// component's direct logit attribution needs no centring. `attograd circuits --processed` reads it.
#pragma once

#include <memory>

#include "nn/transformer.h"

namespace study {

template <typename T>
std::unique_ptr<nn::CausalLM<T>> processed_weights(const nn::CausalLM<T>& model);

}  // namespace study
