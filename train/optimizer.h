// AdamW (bias-corrected, decoupled weight decay) with Muon for the hidden matrices when train.optimizer
// is "muon", the learning-rate schedule, and global-norm gradient clipping: what one training step does to
// the parameters after backward().
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
  bool decay;         // weight decay applies
  bool muon = false;  // a hidden 2-D weight that train.optimizer "muon" updates by Muon (is_muon_matrix)
};

// Whether train.optimizer "muon" updates a parameter by Muon: a Linear or attention weight matrix
// (nn::ParamKind::kWeight, 2-D) inside the blocks; the unembedding lm_head.weight, the embeddings, the norms
// and the biases stay with AdamW (Keller Jordan's and modded-nanogpt's split).
bool is_muon_matrix(const std::string& name, nn::ParamKind kind, int64_t dims);

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
  //
  // Parameters marked muon take Muon's step instead, at muon_lr: their first moments hold the momentum
  // buffer M (their second moments stay 0). With G the clipped gradient, M = 0.95 M + 0.05 G, the Nesterov
  // update U = 0.05 G + 0.95 M, orthogonalised: X = U / (|U|_F + 1e-7) (transposed when it has more rows
  // than columns), five times X = a X + (b A + c A^2) X with A = X X^T and (a, b, c) = (3.4445, -4.7750,
  // 2.0315) (Keller Jordan's quintic); then p *= 1 - muon_lr * wd (when decayed), p -= muon_lr *
  // sqrt(max(1, rows / cols)) * X (modded-nanogpt's scale). In float32, one matrix at a time.
  void step(double lr, float grad_scale = 1.0f, double muon_lr = 0);

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
