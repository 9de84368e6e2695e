// Weight processing as TransformerLens's from_pretrained does it (its arguments fold_ln,
// center_writing_weights, center_unembed and fold_value_biases are the steps below), on a copy of the model:
//   - fold_ln: fold each norm's weight w and bias b into the Linear that reads it (ln1 into wq, wk, wv; ln2
//     into fc1 and a gated MLP's gate; ln_f into lm_head): W' = W diag(w), bias' = bias + W b (RMSNorm has
//     no b), then, when the norm centres (LayerNorm; RMSNorm does not), centre each row of W' over its
//     inputs (the normalised input has zero mean, so a constant per row reads nothing); the norm keeps
//     weight 1 and bias 0;
//   - center_writing_weights, when the norms centre: centre every weight that writes to the residual stream
//     over d_model: tok_emb and pos_emb rows, wo's and fc2's columns and their biases (every reader of the
//     stream is a norm that removes the mean; without one the stream's mean is read, and the writers stay
//     as they are);
//   - center_unembed: centre the unembedding over the vocabulary: lm_head.weight's columns and its bias
//     (softmax ignores a constant added to every logit), unless model.logit_softcap caps the logits (tanh
//     is not shift-invariant: the unembedding stays as it is);
//   - fold_value_biases: wo.bias += Wo b_v, b_v (wv.bias, per kv head, repeated to the query heads that
//     read it) then 0: a pattern row sums to 1, so the value bias adds Wo b_v at every position whatever
//     the pattern (a model without biases has none to fold).
// A model with tie_embeddings gives an untied copy (lm_head.weight a copy of tok_emb.weight), as the fold
// and the centring treat the two differently; a parallel block's ln2 folds into fc1 as any other; rotary
// positions, grouped-query heads, local windows, QK-norm and gated MLPs need nothing more (each step
// leaves q, k and v, or the stream as its norms read it, unchanged).
// The processed model gives the same log-probabilities (to float rounding; the logits differ by a constant
// per position), and its weights read more directly: a head's W_Q^h already holds ln1's weight, a
// component's direct logit attribution needs no centring. `attograd circuits --processed` reads it (the
// default steps); `attograd import --process` saves it (every step).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/transformer.h"

namespace analysis {

// The steps to run, named as TransformerLens's from_pretrained arguments. The default is what
// `circuits --processed` has always read: fold_value_biases off.
struct Processing {
  bool fold_ln = true;
  bool center_writing_weights = true;
  bool center_unembed = true;
  bool fold_value_biases = false;
};

// Every step on.
inline Processing all_processing() {
  return {true, true, true, true};
}

// What each asked step did to this model, in the order above: {step, what it changed, or "skipped: why"}.
using ProcessingLog = std::vector<std::pair<std::string, std::string>>;

template <typename T>
std::unique_ptr<nn::CausalLM<T>> processed_weights(const nn::CausalLM<T>& model, const Processing& steps = {},
                                                   ProcessingLog* log = nullptr);

}  // namespace analysis
