// Evaluating a sparse autoencoder, with SAELens's definitions: on a model's held-out sequences
// (reconstruction, sparsity, dead features, the model's loss with the SAE spliced in, and each feature's
// top examples and logit effect), and on a synthetic source whose true features are known (mean max
// cosine similarity, and MCC after a Hungarian matching).
#pragma once

#include <string>
#include <vector>

#include "dictionary/sae.h"
#include "findings/sae_view.h"
#include "nn/transformer.h"
#include "train/tasks.h"

namespace dictionary {

struct SaeEval {
  int64_t tokens = 0;                      // held-out tokens the SAE ran on
  double mse = 0;                          // mean over tokens and dims of (x_hat - x)^2
  double explained_variance = 0;           // 1 - sum ||x - x_hat||^2 / sum ||x - mean(x)||^2, over all tokens
  double l0 = 0;                           // mean number of active features per token
  int64_t dead = 0;                        // features active on no held-out token
  std::vector<double> density;             // per feature: fraction of tokens where active
  std::vector<int64_t> density_histogram;  // dead, then log10(density) bins [-6,-5), ..., [-1, 0]
  double ce_clean = 0, ce_with_sae = 0, ce_zero_ablation = 0;
  double ce_loss_recovered = 0;  // (ce_zero_ablation - ce_with_sae) / (ce_zero_ablation - ce_clean)
  double kl = 0;                 // mean over scored tokens of KL(clean || with SAE)
};

// Evaluates `sae` at `point` on `held_out` (scored targets as the task's loss). The with-SAE and zero-
// ablation forwards replace the activation at the kept tokens (config.skip_bos as in training) through a
// hook. With `features`, also each feature's top config.top_examples examples (one per sequence) and its
// logit effect through the unembedding (`top_tokens` each way); token names from `task`.
SaeEval evaluate_sae(const nn::CausalLM<float>& model, const train::Task& task, const SaeParams<float>& sae,
                     const SaeConfig& config, const std::string& point, const train::Batch& held_out,
                     std::vector<findings::SaeFeature>* features, int top_tokens = 5);

// Rows [b0, b1) of a batch, as a batch of their own.
train::Batch slice(const train::Batch& batch, int b0, int b1);
// A feature's strongest activation in one sequence, at `pos`: a candidate top example.
struct FeatureHit {
  float act;
  int64_t seq;
  int pos;
};
// Offers a feature's activation `hit` to its top examples `best`: one per sequence (its strongest), at
// most `top` of them (the strongest).
void offer_example(std::vector<FeatureHit>& best, FeatureHit hit, int top);
// A feature's page entry from its logit effects `row` (one per token of the vocabulary, V) and its top
// examples `best` (sorted here, strongest first, ties by sequence): `top_tokens` promoted and suppressed
// tokens each, and one example per hit, without its tokens. Its index and density are the caller's.
void fill_feature(findings::SaeFeature& f, const float* row, int64_t V, int top_tokens,
                  std::vector<FeatureHit>& best, const train::Task& task);
// The name of token `id` of the model's vocabulary, which may be larger than the task's: ids the task never
// uses are "<id N>", as analysis::token_label names them.
std::string vocab_token_name(const train::Task& task, int64_t id);
// The names of a one-sequence batch's tokens, up to its first padding.
std::vector<std::string> sequence_token_names(const train::Task& task, const train::Batch& one);
// Log-softmax of one row of logits (V values), in double.
std::vector<double> log_probs(const float* logits, int64_t V);

// The next-token losses SAELens reports for a dictionary spliced into the model: summed over the scored
// targets of each chunk, the cross-entropy of the clean, the spliced and the zero-ablated logits, and
// KL(clean || spliced); then their means and the CE loss recovered. Shared by the SAE's and the
// transcoders' evaluations.
struct SplicedLoss {
  double ce[3] = {0, 0, 0};  // clean, spliced, zero-ablated
  double kl = 0;
  int64_t scored = 0;

  // One chunk's three forwards, (B, T, V) each, at its targets (negative: not scored).
  void add(const std::vector<int32_t>& targets, const ag::Tensor<float>& clean,
           const ag::Tensor<float>& spliced, const ag::Tensor<float>& zeroed);
  struct Means {
    double clean = 0, spliced = 0, zeroed = 0, kl = 0;
    double recovered = 0;  // (zeroed - spliced) / (zeroed - clean), 0 when the two are equal
  };
  // All 0 when no target was scored.
  Means means() const;
};

// The logit effect of each decoder direction at `point`: W_U diag(ln_f.weight) (the direction written into
// the residual stream: itself, or fc2's weight times it for blocks.L.mlp.post), (d_sae, V).
std::vector<float> decoder_logit_effects(const nn::CausalLM<float>& model, const SaeParams<float>& sae,
                                         const std::string& point);

// The maximum-weight assignment of the n rows of w (n, m), n <= m, to distinct columns: the column of
// each row (the Hungarian algorithm, O(n^2 m)).
std::vector<int> hungarian_max(const std::vector<double>& w, int n, int m);

// Mean over true directions (n, d) of the largest cosine similarity with any learned direction (m, d).
double mean_max_cos(const std::vector<float>& truth, const std::vector<float>& learned, int64_t d);
// Mean Pearson correlation between the true activations (N, n) and the learned ones (N, m) after matching
// each true feature to a distinct learned one by the Hungarian algorithm on |correlation|.
double mcc(const std::vector<float>& truth, int64_t n, const std::vector<float>& learned, int64_t m,
           int64_t N);

}  // namespace dictionary
