// Denoising activation patching (causal tracing): run the model on a corrupt input with one activation
// taken from the clean input's run, and measure how much of the clean answer comes back. The metric is the
// logit difference logit[answer] - logit[wrong] at the last position; recovered = (patched - corrupt) /
// (clean - corrupt), so 1 means the patched activation alone carries the difference and 0 that it carries
// none of it. Patched, each on its own (through activation hooks, nn/hooks.h; the model is never changed):
//   resid_pre of every layer at every position, and the last layer's resid_post (as layer n_layers);
//   every head's z (its output before Wo) at every position, and at all positions at once;
//   every head's q, k and v at every position, and every head's whole attention pattern.
// The patches of one activation run as one batch (entry b patched at position b), so a whole study is
// n_layers + 1 + 2 * n_layers * (n_heads + n_kv_heads) + n_layers forward passes (k and v per kv head).
// Attribution patching (Nanda's): the first-order estimate of each of those patches,
//   (clean - corrupt) . d metric / d activation, the gradient taken on the corrupt run,
// divided by (clean - corrupt) like `recovered`, for all of them from one clean forward and one corrupt
// forward and backward (the gradients at hook points, nn/hooks.h). Exact for a metric linear in the
// activation; it misses what saturates (a softmax pushed to 0 or 1, a LayerNorm's scale).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/patching_view.h"
#include "nn/transformer.h"

namespace analysis {

// attograd patch as a library call (the command line and the Python module both call patch()).
struct PatchRequest {
  Sequence clean, corrupt;  // the same length; token names get BOS put in front when missing
  Token answer;             // the token the metric rewards; none (and no wrong) = the top prediction on clean
  Token wrong;              // the token it subtracts; none = the top prediction on corrupt
  bool attribution = false;  // also attribution patching's estimate of every patch
  std::string save;  // "" = write nothing; NAME = RUN/patching/NAME.json and .svg, report.html rebuilt
};

Output<findings::PatchingResult> patch(StudyRun& run, const PatchRequest& request);

// RUN/patching/NAME.json and .svg, then report.html, under the run's lock; returns the paths written.
std::vector<std::string> save_patch(const StudyRun& run, const std::string& name,
                                    const findings::PatchingResult& r);

// The token with the largest logit at the last position of `ids` (ties: the lowest id).
int top_prediction(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids);

// The metric's token ids when the user gives none: answer = top prediction on clean, wrong = on corrupt.
// Throws std::invalid_argument when they are equal (the metric would be 0 on both runs).
std::pair<int, int> default_answer_wrong(const nn::CausalLM<float>& model, const std::vector<int32_t>& clean,
                                         const std::vector<int32_t>& corrupt);

// Every patch of the list above. Throws std::invalid_argument (one line) when the inputs differ in length or
// are empty, when answer or wrong is outside the vocabulary or they are equal, and when the clean and
// corrupt logit differences are equal (nothing to recover). Token labels are left empty for the caller.
findings::PatchingResult activation_patching(const nn::CausalLM<float>& model,
                                             const std::vector<int32_t>& clean,
                                             const std::vector<int32_t>& corrupt, int answer, int wrong);

// The attribution estimates of every patch activation_patching makes (the same lists; head_all is the sum
// of a head's per-position estimates), and the two unpatched metrics when asked for. The same errors as
// activation_patching.
findings::PatchEffects attribution_patching(const nn::CausalLM<float>& model,
                                            const std::vector<int32_t>& clean,
                                            const std::vector<int32_t>& corrupt, int answer, int wrong,
                                            double* clean_diff = nullptr, double* corrupt_diff = nullptr);

// The gradients at hook points of one forward of ids (B, n): d(sum(grad_logits * logits)) / d(the value
// at each point), a vector-Jacobian product through the reference forward with the model's parameters
// frozen (nn::NoParameterGrads: no parameter gradient is computed or touched), with each point's value and
// the logits. grad_logits holds B * n * V values (the logits' shape, row-major). Throws
// std::invalid_argument naming grad_logits for another size and a point the model lacks (the forward's
// error). Attribution patching takes its gradients from here; so does Python's Run.backward and its
// backward hooks.
//   - grad_logits empty: the metric is the mean next-token cross-entropy over positions 0..n-2 of every row
//     (TransformerLens's return_type "loss"), kept in `loss`; n >= 2.
//   - hooks: forward hooks that run too (read or replace values, nn/hooks.h); the points' captures and
//     gradient probes are added to them, after their own, so values and gradients are of what flows on.
template <typename T>
struct PointGradients {
  ag::Tensor<T> logits;
  double loss = 0;  // with grad_logits empty
  std::map<std::string, ag::Tensor<T>> values, gradients;
};
template <typename T>
PointGradients<T> point_gradients(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t B,
                                  int64_t n, const std::vector<T>& grad_logits,
                                  const std::vector<std::string>& points, nn::Hooks<T>* hooks = nullptr);

}  // namespace analysis
