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

// Muon's step on one matrix W (rows x cols, row-major) with gradient g (times grad_scale) and momentum M.
void muon_step(float* w, const float* grad, float* momentum, int64_t rows, int64_t cols, float grad_scale,
               float lr, float decay) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr float kBeta = 0.95f, kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
  const int64_t n = rows * cols;
  FloatArray m(momentum, n);
  const auto g = Eigen::Map<const Eigen::ArrayXf>(grad, n) * grad_scale;
  m = kBeta * m + (1 - kBeta) * g;
  RowMatrix u(rows, cols);
  Eigen::Map<Eigen::ArrayXf>(u.data(), n) = (1 - kBeta) * g + kBeta * m;  // Nesterov
  const bool tall = rows > cols;
  RowMatrix x = tall ? RowMatrix(u.transpose()) : u;  // (short side) x (long side)
  x /= x.norm() + 1e-7f;
  for (int i = 0; i < 5; ++i) {
    const RowMatrix a = x * x.transpose();
    const RowMatrix b = kB * a + kC * a * a;
    x = kA * x + b * x;
  }
  const float scale = lr * std::sqrt(std::max(1.0f, static_cast<float>(rows) / static_cast<float>(cols)));
  Eigen::Map<RowMatrix> W(w, rows, cols);
  if (tall)
    W = W * decay - scale * x.transpose();
  else
    W = W * decay - scale * x;
}

}  // namespace

bool is_muon_matrix(const std::string& name, nn::ParamKind kind, int64_t dims) {
  return kind == nn::ParamKind::kWeight && dims == 2 && name != "lm_head.weight";
}

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

void AdamW::step(double lr, float grad_scale, double muon_lr) {
  ++t_;
  const double bc1 = 1 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1 - std::pow(beta2_, static_cast<double>(t_));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1 / std::sqrt(bc2));
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_),
              eps = static_cast<float>(eps_);
  std::vector<Span> spans = spans_of(params_);
  spans.erase(
      std::remove_if(spans.begin(), spans.end(), [&](const Span& s) { return params_[s.param].muon; }),
      spans.end());
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
  // Muon's matrices, one per thread at a time; each matrix's arithmetic is the same on any thread.
  std::vector<size_t> muon;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].muon && params_[i].tensor->has_grad()) muon.push_back(i);
  if (muon.empty()) return;
  ag::parallel_for(static_cast<int64_t>(muon.size()), 1 << 20, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const OptimParam& op = params_[muon[k]];
      ag::Tensor<float>& p = *op.tensor;
      const float decay = op.decay ? static_cast<float>(1 - muon_lr * weight_decay_) : 1.0f;
      muon_step(p.data(), p.grad(), m_[muon[k]].data(), p.size(0), p.size(1), grad_scale,
                static_cast<float>(muon_lr), decay);
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
