// Cross-layer transcoders (Ameisen et al. 2025, "Circuit tracing"; circuit-tracer's CrossLayerTranscoder):
// one dictionary per layer l, reading layer l's MLP input, whose features write to the MLP output of every
// layer l' >= l. Layer l's part is an SaeParams with writes = n_layers - l: W_enc (d_model, d_sae), b_enc,
// W_dec (d_sae, writes * d_model) holding feature j's decoder row into layer l + i's MLP output at columns
// [i d_model, (i + 1) d_model) (circuit-tracer's W_dec[l] (d_sae, n_layers - l, d_model), as the file
// stores it), b_dec (d_model) layer l's output bias, W_skip (d_model, d_model) with the skip. Layer l's MLP
// output is predicted as b_dec[l] + x_l W_skip[l] + sum over l0 <= l of f_{l0} W_dec[l0 -> l]. Each
// feature's decoder rows have unit norm together (the concatenation), so the L1 penalty on f is
// circuit-tracer's sparsity weighted by the decoder's norm. The trainer is the dictionary trainer's
// (dictionary/sae_tool.h's loop, the SAE config table, AdamW, resampling, checkpoints);
// dictionary/transcoder.h trains, saves and evaluates it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "dictionary/sae.h"
#include "train/optimizer.h"

namespace dictionary {

// One transcoder layer's features on x (N, d_in): act(x W_enc + b_enc), sae_forward's encoder (TopK per
// row, BatchTopK over the batch when training, JumpReLU and inference BatchTopK by p.threshold).
template <typename T>
ag::Tensor<T> transcoder_encode(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, int k,
                                T bandwidth = T(0.001), bool training = false);

template <typename T>
struct CltOutput {
  std::vector<ag::Tensor<T>> f;      // per layer (N, d_sae)
  std::vector<ag::Tensor<T>> y_hat;  // per layer (N, d_model): the MLP output predicted
  ag::Tensor<T> mse;                 // [] sum over layers of the mean over tokens of ||y_hat - y||^2
  ag::Tensor<T> sparsity;            // [] sum over layers of the mean over tokens of sum_j f_j
  ag::Tensor<T> loss;  // mse + coefficient * sparsity (ReLU), + coefficient * L0 (JumpReLU), mse (TopK)
};

// The cross-layer transcoder `p` (one part per layer) on x[l] (N, d_model) each, its MSE to y[l].
template <typename T>
CltOutput<T> clt_forward(const std::vector<SaeParams<T>>& p, const std::vector<ag::Tensor<T>>& x,
                         SaeActivation act, T coefficient, int k, const std::vector<ag::Tensor<T>>& y,
                         T bandwidth = T(0.001), bool training = false);

// Layer `layer`'s MLP output as transcoders predict it, from every layer's features f (n, d_sae; undefined
// for a layer without a transcoder) and the layer's input x (n, d_model): b_dec + x W_skip + the decoder
// rows of every layer at or below it that writes to it (a per-layer transcoder's own only).
ag::Tensor<float> predict_mlp_out(const std::vector<SaeParams<float>>& transcoders, int layer,
                                  const std::vector<ag::Tensor<float>>& f, const ag::Tensor<float>& x);

// Training state of a cross-layer transcoder on L layers of width D: the parameters (on scaled
// activations: every input multiplied by in_scale, every target by out_scale, one factor each over the
// layers), AdamW, fire counts since the last resampling.
class CltTrainer {
 public:
  // out_mean (L * D, raw): every layer's b_dec start.
  CltTrainer(const SaeConfig& config, int L, int64_t D, const std::vector<float>& out_mean, float in_scale,
             float out_scale);
  // One step on x and y (N, L * D), raw: layer l's input and MLP output at columns [l D, (l + 1) D).
  SaeTrainer::StepResult step(const ag::Tensor<float>& x, const ag::Tensor<float>& y);
  // Dead features (no token since the last resampling) of each layer get the residual of all the layers
  // they write to at one token (drawn by its squared error) as their decoder rows, that token's input row
  // as their encoder column (scaled as SaeTrainer's), b_enc 0, moments reset. Returns how many.
  int resample_dead(const std::vector<ag::Tensor<float>>& x, const std::vector<ag::Tensor<float>>& y,
                    const std::vector<ag::Tensor<float>>& y_hat);

  const std::vector<SaeParams<float>>& params() const { return p_; }
  // Folded to read raw activations (fold_activation_scales on each layer): what the files hold.
  std::vector<SaeParams<float>> raw_params() const;
  const SaeConfig& config() const { return config_; }
  int64_t steps_done() const { return step_; }
  int64_t n_params() const;
  float activation_scale() const { return scale_; }
  float out_scale() const { return out_scale_; }
  // The checkpoint (every layer's parameters as "l.NAME", AdamW moments, fire counts, the scales, the step)
  // and its bit-exact restore; a corrupt one is refused in one line naming the file and tensor or field.
  void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata) const;
  void load_checkpoint(const std::string& path);

 private:
  std::vector<train::OptimParam> optim_params();
  SaeConfig config_;
  int L_;
  int64_t D_;
  std::vector<SaeParams<float>> p_;
  std::vector<ag::Tensor<float>> log_threshold_;  // JumpReLU's trained parameter per layer
  train::AdamW optimizer_;
  std::vector<std::vector<int64_t>> fired_;
  std::vector<size_t> first_param_;  // each layer's first index in the optimizer's parameters
  int64_t step_ = 0;
  float scale_ = 1.f, out_scale_ = 1.f;
};

}  // namespace dictionary
