// Sparse autoencoders (dictionary learning) on activations, with SAELens's conventions: the encoder
// f = act((x - b_dec) W_enc + b_enc), the decoder x_hat = f W_dec + b_dec, W_enc (d_in, d_sae),
// W_dec (d_sae, d_in) with unit-norm rows (each feature's direction), act ReLU with an L1 penalty or TopK,
// trained on activations scaled so their mean norm is sqrt(d_in) (the scale folded back on save).
// The same dictionary as a transcoder (SAELens's Transcoder and SkipTranscoder): it reads x (an MLP's
// input, d_in) and writes y_hat (the MLP's output, d_out): f = act(x W_enc + b_enc),
// y_hat = f W_dec + b_dec (+ x W_skip with a skip), trained on MSE to the target y; input and target are
// each scaled by a factor of their own.
// This file holds the SAE's config, its parameters, its loss (autograd ops: the sparse products are
// autograd/ops.h's topk_relu, relu_decode and sparse_grad_linear), one
// training step (AdamW, decoder renormalisation, dead-feature resampling) and its file format. Where the
// activations come from (a model's hook point, a synthetic source) is dictionary/sae_source.h; the evaluation
// on a model is dictionary/sae_eval.h. Not a trainer of models: the model is read, never changed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "io/field_info.h"
#include "train/optimizer.h"

namespace dictionary {

// relu (with the L1 penalty), topk (k per token), batchtopk (k N over a batch of N at training, a
// threshold learnt from it at inference) or jumprelu (a threshold per feature, with the L0 penalty):
// SAELens's architectures.
enum class SaeActivation { relu, topk, batchtopk, jumprelu };
// How activations are scaled before the SAE sees them (SAELens's `normalize_activations`): not at all, or
// by one factor fixed from the data so the mean norm of a training row is sqrt(d_in)
// (`expected_average_only_in`), so that one l1_coefficient and lr fit every model and point.
enum class SaeNormalize { none, expected_average_only_in };

// An SAE's training config (docs/sae.md lists the fields). Every field has a default; unknown keys are
// errors.
struct SaeConfig {
  int64_t d_sae = 0;  // features; 0: expansion * d_in
  int expansion = 8;  // d_sae / d_in when d_sae is 0
  SaeActivation activation = SaeActivation::relu;
  SaeNormalize normalize_activations = SaeNormalize::expected_average_only_in;
  double l1_coefficient = 0.3;        // ReLU: the L1 penalty's weight (unit-norm decoder rows)
  int k = 16;                         // TopK, BatchTopK: active features per token (BatchTopK: on average)
  double l0_coefficient = 1.0;        // JumpReLU: the L0 penalty's weight
  double jumprelu_bandwidth = 0.001;  // JumpReLU: the pseudo-derivatives' kernel width
  double jumprelu_init_threshold = 0.001;  // JumpReLU: every feature's starting threshold
  double topk_threshold_lr = 0.01;         // BatchTopK: the inference threshold's moving-average rate
  int64_t steps = 3000;                    // training steps
  int batch_size = 1024;                   // tokens per step
  double lr = 1e-3;                        // AdamW, constant after warmup
  int warmup = 100;                        // linear warmup steps
  double weight_decay = 0.0;               // AdamW on W_enc and W_dec
  int64_t resample_every = 1000;           // dead-feature resampling period in steps; 0: never
  int64_t buffer_tokens = 65536;           // activations collected and shuffled at a time
  bool skip_bos = true;                    // leave position 0 (BOS) out of training, evaluation and splicing
  int eval_sequences = 256;                // held-out sequences for eval.json and features.json
  int top_examples = 5;                    // features.json: top-activating examples per feature
  int checkpoint_every = 1000;             // steps between checkpoints (and at the end)
  uint64_t seed = 1;
  bool skip = false;  // transcoders: also a linear skip W_skip (d_in, d_out) from input to output

  int64_t features(int64_t d_in) const { return d_sae > 0 ? d_sae : expansion * d_in; }
};

// The config in `j`, validated field by field against the SAE config's table (dictionary/sae.cpp); errors are
// an io::JsonError, one line "SOURCE: /field: what was expected".
SaeConfig sae_config_from_json(const nlohmann::json& j, const std::string& source);
// The SAE config file at `path`, read through the one bounded JSON reader (io/json_read.h) and validated.
SaeConfig load_sae_config(const std::string& path);
nlohmann::json sae_config_to_json(const SaeConfig& c);
// The table's rows (key, type, default, valid values, meaning), as a docs field table shows them.
std::vector<io::FieldInfo> sae_config_field_infos();

// The SAE's (or transcoder's) parameters, SAELens's names and shapes.
template <typename T>
struct SaeParams {
  ag::Tensor<T> W_enc;   // (d_in, d_sae)
  ag::Tensor<T> b_enc;   // (d_sae)
  ag::Tensor<T> W_dec;   // (d_sae, d_out), rows of unit norm
  ag::Tensor<T> b_dec;   // (d_out)
  ag::Tensor<T> W_skip;  // (d_in, d_out): a skip transcoder's linear path; undefined otherwise
  // A transcoder's encoder reads x itself; an SAE's reads x - b_dec (input and output are one point).
  bool transcoder = false;
  // (d_sae): JumpReLU's and BatchTopK's threshold, f = pre where pre > threshold, else 0 (SAELens's
  // JumpReLU inference, what a BatchTopK dictionary is saved as); undefined for ReLU and TopK.
  ag::Tensor<T> threshold;
  // A cross-layer transcoder's layer l (dictionary/clt.h): the MLP outputs it writes, its own and the next
  // writes - 1 layers', W_dec (d_sae, writes * d_out) holding feature j's row into each side by side
  // (circuit-tracer's W_dec[l] (d_sae, n_layers - l, d_model)); 1 for every other dictionary.
  int64_t writes = 1;

  int64_t d_in() const { return W_enc.size(0); }
  int64_t d_sae() const { return W_enc.size(1); }
  int64_t d_out() const { return W_dec.size(1) / writes; }
};

// What a dictionary reads and writes: an SAE (d_out = d_in, one point) or a transcoder (input and output
// at two points), with or without the skip.
struct DictShape {
  int64_t d_in = 0, d_out = 0;
  bool transcoder = false, skip = false;
};

// Random unit decoder rows (normal, normalised), W_enc = W_dec^T, zero biases; b_dec set to `mean` when
// given (the data's mean, a better start than zero).
SaeParams<float> init_sae(int64_t d_in, int64_t d_sae, ag::Rng& rng, const std::vector<float>& mean = {});
// A transcoder's start: random unit decoder rows (d_sae, d_out), encoder columns random of norm 1, zero
// b_enc, b_dec the target's mean (when given), W_skip zero (with the skip).
SaeParams<float> init_transcoder(const DictShape& shape, int64_t d_sae, ag::Rng& rng,
                                 const std::vector<float>& out_mean = {});

template <typename T>
struct SaeOutput {
  ag::Tensor<T> f;      // (N, d_sae) feature activations
  ag::Tensor<T> x_hat;  // (N, d_out) reconstruction (a transcoder's: its prediction of the target)
  ag::Tensor<T> mse;    // [] mean over tokens of ||x_hat - y||^2 (SAELens's training MSE, summed over d_out)
  ag::Tensor<T> sparsity;  // [] mean over tokens of sum_j f_j (the L1 norm: f >= 0, decoder rows unit)
  ag::Tensor<T> loss;      // [] mse + l1 * sparsity (ReLU), mse + l0 * L0 (JumpReLU), mse (TopK, BatchTopK)
};

// The SAE on x (N, d_in), with the graph recorded when gradients are on; its MSE is to `y` (N, d_out), a
// transcoder's target (needed when d_out differs from d_in), or to x when y is undefined. TopK keeps each
// row's k largest pre-activations (ties: the lower index) and zeroes the rest before the ReLU; no gradient
// flows to the zeroed ones. `coefficient` weighs the sparsity penalty: ReLU's L1, JumpReLU's L0 (the
// mean over tokens of the features above threshold, its threshold gradient autograd/ops.h's
// pseudo-derivative with `bandwidth`). BatchTopK keeps the k N largest of the batch when `training`, and
// (as JumpReLU) the features above p.threshold otherwise.
template <typename T>
SaeOutput<T> sae_forward(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, T coefficient,
                         int k, const ag::Tensor<T>& y = {}, T bandwidth = T(0.001), bool training = false);

// Each decoder row scaled to unit norm (a zero row is left as it is).
void normalize_decoder(SaeParams<float>& p);

// The factor that brings the mean norm of `rows` (n rows of d) to sqrt(d) (SAELens's
// expected_average_only_in); 1 when the rows are all zero.
float activation_scale(const std::vector<float>& rows, int64_t d);

// The SAE trained on activations multiplied by `scale`, rewritten to read the raw activations: b_enc and
// b_dec divided by `scale`, W_enc and W_dec unchanged (decoder rows stay unit norm), so its features are
// the trained ones divided by `scale` and its reconstruction is the trained one divided by `scale`.
SaeParams<float> fold_activation_scale(const SaeParams<float>& p, float scale);
// A transcoder trained on x * in_scale and y * out_scale, rewritten to read raw x and write raw y: W_enc
// and W_skip times in_scale / out_scale, b_enc and b_dec divided by out_scale (features divided by
// out_scale, decoder rows unit). An SAE (p.transcoder false, in_scale = out_scale) folds as above.
SaeParams<float> fold_activation_scales(const SaeParams<float>& p, float in_scale, float out_scale);

// Training state: the parameters, AdamW, and the per-feature fire counts since the last resampling.
class SaeTrainer {
 public:
  // `data_mean` (raw, b_dec's start; empty: zero) and `activation_scale`, the factor every batch is
  // multiplied by before the SAE sees it (1: none; activation_scale() when the config normalises).
  SaeTrainer(const SaeConfig& config, int64_t d_in, const std::vector<float>& data_mean,
             float activation_scale = 1.f);
  // A transcoder: reads d_in, writes d_out; `out_mean` (raw, b_dec's start), the input's and the
  // target's scales. config.skip adds W_skip.
  SaeTrainer(const SaeConfig& config, const DictShape& shape, const std::vector<float>& out_mean,
             float in_scale, float out_scale);

  // One step on x (N, d_in) of raw activations: scaled by activation_scale, forward, backward, AdamW at the
  // scheduled lr, decoder rows renormalised; every resample_every steps, dead features resampled from this
  // batch (resample_dead). Returns the loss (on the scaled activations).
  struct StepResult {
    float loss, mse, l0;
    int resampled;
  };
  StepResult step(const ag::Tensor<float>& x);
  // A transcoder's step: x (N, d_in) and its target y (N, d_out), raw, each scaled by its own factor.
  StepResult step(const ag::Tensor<float>& x, const ag::Tensor<float>& y);

  // Features that fired on no token since the last resampling get a new direction: the residual
  // x - x_hat of one of this batch's tokens, drawn with probability proportional to its squared error
  // (Bricken et al. 2023), normalised, as their decoder row; their encoder column the same direction
  // scaled to 0.2 times the mean norm of the alive features' encoder columns; b_enc 0; their AdamW
  // moments reset. Returns how many were resampled.
  int resample_dead(const ag::Tensor<float>& x, const ag::Tensor<float>& x_hat);
  // A transcoder's: the decoder row from the target's residual y - y_hat, the encoder column from the
  // input row x of the same token (normalised, scaled as above).
  int resample_dead(const ag::Tensor<float>& x, const ag::Tensor<float>& y, const ag::Tensor<float>& y_hat);

  // The parameters as trained, on scaled activations.
  SaeParams<float>& params() { return p_; }
  const SaeParams<float>& params() const { return p_; }
  float activation_scale() const { return scale_; }
  float out_scale() const { return out_scale_; }
  // The parameters folded to read raw activations (fold_activation_scales): what sae.safetensors holds.
  SaeParams<float> raw_params() const { return fold_activation_scales(p_, scale_, out_scale_); }
  const SaeConfig& config() const { return config_; }
  int64_t steps_done() const { return step_; }

  // The checkpoint (parameters, AdamW moments and step, fire counts, the activation scale) to `path`;
  // load_checkpoint restores it bit-exactly (a checkpoint without a scale, from before normalisation, has
  // scale 1), and refuses a corrupt one (a value not finite, a negative second moment or fire count,
  // a fractional count, a step beyond the config's steps) with one line naming the file and the tensor or
  // metadata field.
  void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata) const;
  void load_checkpoint(const std::string& path);

 private:
  void init_threshold();  // p_.threshold from log_threshold_ (JumpReLU) or 0 (BatchTopK)
  SaeConfig config_;
  SaeParams<float> p_;
  // JumpReLU's trained parameter (SAELens's log_threshold); p_.threshold is exp of it.
  ag::Tensor<float> log_threshold_;
  train::AdamW optimizer_;
  std::vector<int64_t> fired_;  // tokens each feature fired on since the last resampling
  int64_t step_ = 0;
  float scale_ = 1.f, out_scale_ = 1.f;
};

// sae.safetensors: W_enc, b_enc, W_dec, b_dec (SAELens's names and shapes; a skip transcoder's W_skip too)
// and the metadata given (the config as JSON under "config", the hook point under "hook_name", d_in and
// d_sae, the activation scale folded into the weights under "activation_scale"; a transcoder's
// "architecture" is "transcoder" or "skip_transcoder"). The weights read raw activations.
void write_sae_file(const std::string& path, const SaeParams<float>& p,
                    const std::map<std::string, std::string>& metadata);
// Reads an SAE or transcoder file: the four tensors (and W_skip when its metadata architecture is
// skip_transcoder) with consistent shapes (d_in, d_sae, d_out >= 1; an SAE's d_out = d_in), finite values.
// Errors are one line naming the file and the tensor.
SaeParams<float> load_sae(const std::string& path);

}  // namespace dictionary
