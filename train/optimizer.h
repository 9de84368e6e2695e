// AdamW (bias-corrected, decoupled weight decay), the learning-rate schedule, and global-norm gradient
// clipping: what one training step does to the parameters after backward().
#pragma once

#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"
#include "train/config.h"

namespace train {

struct OptimParam {
  std::string name;
  ag::Tensor<float>* tensor;
  bool decay;  // weight decay applies
};

// Whether weight decay applies to a parameter of this kind (declared where the module registers it) under
// train.decay: "all" every parameter (torch.optim.AdamW's default); "weights" the weight matrices only
// (nn::ParamKind::kWeight: the Linear and attention weights), never biases, norms or the embeddings
// (GPT-2's rule).
bool uses_weight_decay(nn::ParamKind kind, const std::string& decay = "weights");

class AdamW {
 public:
  AdamW(std::vector<OptimParam> params, double weight_decay, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8);

  // One update with the parameters' current gradients times grad_scale (a parameter without a gradient is
  // left as it is), in PyTorch's order: p *= 1 - lr*wd; m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2)
  // + eps). grad_scale is clipping's factor (clip_factor): folded into this pass, the clip costs no pass
  // of its own over the gradients, with the same bits as scaling them first.
  void step(double lr, float grad_scale = 1.0f);

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

// The global L2 norm of all gradients, computed in double, the same bits for any thread count.
double grad_norm(const std::vector<OptimParam>& params);
// What clipping to max_norm multiplies every gradient by: max_norm / norm if max_norm > 0 and the norm
// exceeds it, else 1.
float clip_factor(double norm, double max_norm);
// grad_norm, then every gradient scaled in place by clip_factor. Returns the norm before clipping.
// (The trainer instead passes clip_factor to AdamW::step, which saves a pass over the gradients.)
double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm);

// Linear warmup over `warmup` steps to train.lr, then constant, or cosine down to 10% of train.lr at the
// last step. `step` counts from 0.
double learning_rate(const TrainConfig& train, int64_t step);

}  // namespace train
