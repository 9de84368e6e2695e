#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/threads.h"

namespace train {

namespace {

// Parameters are cut into spans of at most this many elements, and the spans of all parameters are
// spread over the threads in one job: most tensors of a small model are below one span, and a job per
// tensor ran them one after another on one thread.
constexpr int64_t kSpan = 2048;

struct Span {
  size_t param;
  int64_t begin, length;
};

// The spans of every parameter that has a gradient, in parameter order.
std::vector<Span> spans_of(const std::vector<OptimParam>& params) {
  std::vector<Span> spans;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].tensor->has_grad()) continue;
    const int64_t n = params[i].tensor->numel();
    for (int64_t b = 0; b < n; b += kSpan) spans.push_back({i, b, std::min(kSpan, n - b)});
  }
  return spans;
}

int64_t total_length(const std::vector<Span>& spans) {
  int64_t n = 0;
  for (const Span& s : spans) n += s.length;
  return n;
}

using FloatArray = Eigen::Map<Eigen::ArrayXf>;

// The global L2 norm of the gradients over `spans`: each span's sum of squares on its own, then the spans
// added in order, so the same bits for any thread count.
double norm_of_spans(const std::vector<OptimParam>& params, const std::vector<Span>& spans) {
  std::vector<double> partial(spans.size());
  ag::parallel_for(static_cast<int64_t>(spans.size()), 4 * total_length(spans), [&](int64_t s0, int64_t s1) {
    for (int64_t k = s0; k < s1; ++k) {
      const Span& sp = spans[k];
      partial[k] = ag::ConstVecMap<float>(params[sp.param].tensor->grad() + sp.begin, sp.length)
                       .cast<double>()
                       .square()
                       .sum();
    }
  });
  double sq = 0;
  for (double x : partial) sq += x;
  return std::sqrt(sq);
}

}  // namespace

bool uses_weight_decay(nn::ParamKind kind, const std::string& decay) {
  return decay == "all" || kind == nn::ParamKind::kWeight;
}

AdamW::AdamW(std::vector<OptimParam> params, double weight_decay, double beta1, double beta2, double eps)
    : params_(std::move(params)), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const auto& p : params_) {
    m_.emplace_back(p.tensor->numel(), 0.0f);
    v_.emplace_back(p.tensor->numel(), 0.0f);
  }
}

void AdamW::step(double lr, float grad_scale) {
  ++t_;
  const double bc1 = 1 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1 - std::pow(beta2_, static_cast<double>(t_));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(bc2));
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_),
              eps = static_cast<float>(eps_);
  const std::vector<Span> spans = spans_of(params_);
  // Per span (small enough to stay in L1): m, then v, then w, each one vectorised sweep (Eigen's sqrt,
  // unlike std::sqrt, sets no errno, so it vectorises); elements are independent, so the split over
  // threads changes nothing.
  ag::parallel_for(static_cast<int64_t>(spans.size()), 8 * total_length(spans), [&](int64_t s0, int64_t s1) {
    for (int64_t k = s0; k < s1; ++k) {
      const Span& sp = spans[k];
      ag::Tensor<float>& p = *params_[sp.param].tensor;
      const float decay = params_[sp.param].decay ? static_cast<float>(1 - lr * weight_decay_) : 1.0f;
      FloatArray w(p.data() + sp.begin, sp.length), m(m_[sp.param].data() + sp.begin, sp.length),
          v(v_[sp.param].data() + sp.begin, sp.length);
      const auto g = Eigen::Map<const Eigen::ArrayXf>(p.grad() + sp.begin, sp.length) * grad_scale;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g.square();
      w = w * decay - step_size * m / (v.sqrt() * inv_sqrt_bc2 + eps);
    }
  });
}

double grad_norm(const std::vector<OptimParam>& params) {
  return norm_of_spans(params, spans_of(params));
}

float clip_factor(double norm, double max_norm) {
  return max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm) {
  const std::vector<Span> spans = spans_of(params);
  const double norm = norm_of_spans(params, spans);
  const float factor = clip_factor(norm, max_norm);
  if (factor == 1.0f) return norm;
  ag::parallel_for(static_cast<int64_t>(spans.size()), total_length(spans), [&](int64_t s0, int64_t s1) {
    for (int64_t k = s0; k < s1; ++k) {
      const Span& sp = spans[k];
      ag::VecMap<float>(params[sp.param].tensor->grad() + sp.begin, sp.length) *= factor;
    }
  });
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

}  // namespace train
