// What SaeTrainer and CltTrainer (dictionary/sae.h, dictionary/clt.h) share: the learning-rate schedule,
// and the common part of their checkpoints: every AdamW parameter with its two moments, the step counts
// and activation scales in the metadata, and the checks that refuse a corrupt checkpoint before anything
// is restored. Each trainer adds its own state (fire counts, BatchTopK thresholds) around these.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "dictionary/sae.h"
#include "train/optimizer.h"
#include "train/safetensors.h"

namespace dictionary {

// The learning rate at `step` (from 0): linear warmup, then constant.
double sae_lr(const SaeConfig& c, int64_t step);

// The weight of the sparsity penalty in the training loss: l0_coefficient for JumpReLU, l1_coefficient
// otherwise (TopK and BatchTopK have no penalty: sae_forward and clt_forward ignore it).
float sparsity_coefficient(const SaeConfig& c);

// SAELens's BatchTopK update after a step: threshold <- (1 - lr) threshold + lr * (the smallest positive
// activation of f), the same value for every feature; unchanged when f has none.
void update_batch_threshold(ag::Tensor<float>& threshold, const ag::Tensor<float>& f, double lr);

// Adds to `fired` (d_sae counts) the tokens of f (N, d_sae) each feature is active on; returns the number
// of active (token, feature) pairs.
int64_t count_fired(const ag::Tensor<float>& f, std::vector<int64_t>& fired);

// The norm a resampled encoder column gets: 0.2 times the mean norm of the columns of W_enc (d_in, d_sae)
// whose feature fired (0.2 when none did).
float resampled_encoder_norm(const ag::Tensor<float>& W_enc, const std::vector<int64_t>& fired);

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Each parameter of `ps` (AdamW's order), then its first and second moments: NAME, adam_m.NAME, adam_v.NAME.
std::vector<train::NamedArray> adam_arrays(const std::vector<train::OptimParam>& ps, train::AdamW& optimizer);

// The names and shapes adam_arrays writes for `ps`, in its order.
TensorShapes adam_shapes(const std::vector<train::OptimParam>& ps);

// `metadata` with the step, AdamW's steps and the activation scale; with `write_out_scale`, the output's
// scale (a transcoder's) too.
std::map<std::string, std::string> checkpoint_metadata(std::map<std::string, std::string> metadata,
                                                       int64_t step, int64_t adam_steps, float scale,
                                                       bool write_out_scale, float out_scale);

// Refuses a corrupt checkpoint: every value of the `expected` tensors finite; the second moments
// (adam_v.*), the fire counts ("fired", "fired.L") and BatchTopK's thresholds ("threshold",
// "threshold.L") non-negative; the fire counts whole.
void check_checkpoint_values(const train::SafetensorsFile& file, const TensorShapes& expected,
                             const std::string& path);

// A checkpoint's metadata, read and checked: the steps within the config's `max_steps` and AdamW's within
// the step; the scales positive and finite. An absent activation_scale reads 1 unless `scales_required`;
// activation_scale_out is read when `read_out_scale`, else it is the input's scale.
struct CheckpointCounts {
  uint64_t step = 0, adam_steps = 0;
  double scale = 1, out_scale = 1;
};
CheckpointCounts read_checkpoint_counts(const train::SafetensorsFile& file, const std::string& path,
                                        int64_t max_steps, bool scales_required, bool read_out_scale);

// Each parameter of `ps` and its two moments restored from `file` (checked by the two functions above).
void restore_adam(const train::SafetensorsFile& file, const std::vector<train::OptimParam>& ps,
                  train::AdamW& optimizer);

}  // namespace dictionary
