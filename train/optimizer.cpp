#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "autograd/threads.h"

namespace ag {

namespace {
// AdamW's elements are spread over the threads in chunks of this many.
constexpr int64_t kChunk = 4096;
}  // namespace

bool uses_weight_decay(const std::string& name) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (!ends_with(".weight")) return false;
  if (name.rfind("tok_emb.", 0) == 0 || name.rfind("pos_emb.", 0) == 0) return false;
  return name.find("ln1.") == std::string::npos && name.find("ln2.") == std::string::npos &&
         name.rfind("ln_f.", 0) != 0;
}

AdamW::AdamW(std::vector<OptimParam> params, double weight_decay, double beta1, double beta2, double eps)
    : params_(std::move(params)), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const auto& p : params_) {
    m_.emplace_back(p.tensor->numel(), 0.0f);
    v_.emplace_back(p.tensor->numel(), 0.0f);
  }
}

void AdamW::step(double lr) {
  ++t_;
  const double bc1 = 1 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1 - std::pow(beta2_, static_cast<double>(t_));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(bc2));
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_),
              eps = static_cast<float>(eps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor<float>& p = *params_[i].tensor;
    if (!p.has_grad()) continue;
    const int64_t n = p.numel();
    float* w = p.data();
    const float* g = p.grad();
    float* m = m_[i].data();
    float* v = v_[i].data();
    const float decay = params_[i].decay ? static_cast<float>(1 - lr * weight_decay_) : 1.0f;
    // One pass over w, g, m, v (the four arrays are read once and written once), element by element in
    // the documented order; elements are independent, so the split over threads changes nothing.
    parallel_for((n + kChunk - 1) / kChunk, 8 * n, [&](int64_t c0, int64_t c1) {
      const int64_t end = std::min(n, c1 * kChunk);
      for (int64_t j = c0 * kChunk; j < end; ++j) {
        const float gj = g[j];
        const float mj = b1 * m[j] + (1 - b1) * gj;
        const float vj = b2 * v[j] + (1 - b2) * (gj * gj);
        m[j] = mj;
        v[j] = vj;
        w[j] = w[j] * decay - step_size * mj / (std::sqrt(vj) * inv_sqrt_bc2 + eps);
      }
    });
  }
}

double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm) {
  double sq = 0;
  for (const auto& p : params)
    if (p.tensor->has_grad())
      sq += ConstVecMap<float>(p.tensor->grad(), p.tensor->numel()).cast<double>().square().sum();
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    const float factor = static_cast<float>(max_norm / (norm + 1e-6));
    for (const auto& p : params)
      if (p.tensor->has_grad()) VecMap<float>(p.tensor->grad(), p.tensor->numel()) *= factor;
  }
  return norm;
}

double learning_rate(const TrainConfig& train, int64_t step) {
  if (step < train.warmup) return train.lr * static_cast<double>(step + 1) / train.warmup;
  if (train.schedule == "constant") return train.lr;
  const int64_t span = std::max<int64_t>(1, train.steps - train.warmup - 1);
  const double progress = std::min(1.0, static_cast<double>(step - train.warmup) / span);
  const double min_lr = 0.1 * train.lr;
  return min_lr + 0.5 * (train.lr - min_lr) * (1 + std::cos(M_PI * progress));
}

}  // namespace ag
