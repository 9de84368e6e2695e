// AdamW (bias-corrected, decoupled weight decay), the learning-rate schedule, and global-norm gradient
// clipping: what one training step does to the parameters after backward().
#pragma once

#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "train/config.h"

namespace train {

struct OptimParam {
  std::string name;
  ag::Tensor<float>* tensor;
  bool decay;  // weight decay applies (Linear weights only)
};

// Weight decay is for Linear weights; never for biases, LayerNorm, or the embeddings (GPT-2's convention).
bool uses_weight_decay(const std::string& parameter_name);

class AdamW {
 public:
  AdamW(std::vector<OptimParam> params, double weight_decay, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8);

  // One update with the parameters' current gradients (a parameter without a gradient is left as it is),
  // in PyTorch's order: p *= 1 - lr*wd; m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
  void step(double lr);

  const std::vector<OptimParam>& params() const { return params_; }
  int64_t steps_taken() const { return t_; }
  // Moments, for checkpoints: m and v per parameter, same order as params().
  std::vector<std::vector<float>>& first_moments() { return m_; }
  std::vector<std::vector<float>>& second_moments() { return v_; }
  void set_steps_taken(int64_t t) { t_ = t; }

 private:
  std::vector<OptimParam> params_;
  double weight_decay_, beta1_, beta2_, eps_;
  int64_t t_ = 0;
  std::vector<std::vector<float>> m_, v_;
};

// The global L2 norm of all gradients, computed in double; if max_norm > 0 and the norm exceeds it, every
// gradient is scaled by max_norm / norm. Returns the norm before clipping.
double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm);

// Linear warmup over `warmup` steps to train.lr, then constant, or cosine down to 10% of train.lr at the
// last step. `step` counts from 0.
double learning_rate(const TrainConfig& train, int64_t step);

}  // namespace train
