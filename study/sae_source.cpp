#include "study/sae_source.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/hooks.h"

namespace study {

namespace {

// Sequences per forward when filling a buffer.
constexpr int kSequencesPerForward = 64;

uint64_t stream_seed(uint64_t seed, uint64_t salt, int64_t index) {
  return seed ^ salt ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index + 1));
}

}  // namespace

ActivationRows capture_rows(const nn::CausalLM<float>& model, const train::Batch& batch,
                            const std::string& point, bool skip_bos) {
  ag::NoGradScope no_grad;
  nn::Hooks<float> hooks;
  hooks.capture(point);
  model.forward(batch.inputs, batch.B, batch.T, batch.is_padding, &hooks);
  const ag::Tensor<float>& a = hooks.captured(point);
  if (a.dim() != 3 || a.size(0) != batch.B || a.size(1) != batch.T)
    throw std::invalid_argument("point " + point + ": expected a point of shape (B, T, D), such as " +
                                "blocks.L.mlp.post or blocks.L.resid_post");
  ActivationRows rows;
  rows.d = a.size(2);
  for (int b = 0; b < batch.B; ++b)
    for (int t = skip_bos ? 1 : 0; t < batch.T; ++t) {
      if (!batch.is_padding.empty() && batch.is_padding[static_cast<size_t>(b) * batch.T + t]) continue;
      rows.seq.push_back(b);
      rows.pos.push_back(t);
    }
  rows.data.resize(static_cast<size_t>(rows.rows() * rows.d));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const float* src = a.data() + (static_cast<int64_t>(rows.seq[r]) * batch.T + rows.pos[r]) * rows.d;
    std::copy(src, src + rows.d, rows.data.data() + r * rows.d);
  }
  return rows;
}

int64_t point_width(const nn::CausalLM<float>& model, const train::Task& task, const std::string& point) {
  ag::Rng rng(1);
  return capture_rows(model, task.sample(rng, 1), point, false).d;
}

ModelActivations::ModelActivations(const nn::CausalLM<float>& model, const train::Task& task,
                                   std::string point, const SaeConfig& config)
    : model_(model), task_(task), point_(std::move(point)), config_(config) {
  d_ = point_width(model_, task_, point_);
  steps_per_buffer_ = std::max<int64_t>(1, config_.buffer_tokens / config_.batch_size);
}

void ModelActivations::fill(int64_t index) {
  if (index == buffer_index_) return;
  const int64_t rows = steps_per_buffer_ * config_.batch_size;
  ag::Rng rng(stream_seed(config_.seed, 0x5AE5AE5AE5AE5AEull, index));
  buffer_.clear();
  buffer_.reserve(static_cast<size_t>(rows * d_));
  while (static_cast<int64_t>(buffer_.size()) < rows * d_) {
    const ActivationRows a =
        capture_rows(model_, task_.sample(rng, kSequencesPerForward), point_, config_.skip_bos);
    if (a.rows() == 0)
      throw std::invalid_argument("point " + point_ + ": the task's sequences have no token to train on");
    const size_t want = std::min(a.data.size(), static_cast<size_t>(rows * d_) - buffer_.size());
    buffer_.insert(buffer_.end(), a.data.begin(), a.data.begin() + static_cast<std::ptrdiff_t>(want));
  }
  // Fisher-Yates over rows.
  for (int64_t i = rows - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    if (j != i)
      std::swap_ranges(buffer_.begin() + i * d_, buffer_.begin() + (i + 1) * d_, buffer_.begin() + j * d_);
  }
  buffer_index_ = index;
}

ag::Tensor<float> ModelActivations::batch(int64_t step) {
  fill(step / steps_per_buffer_);
  const int64_t off = (step % steps_per_buffer_) * config_.batch_size * d_;
  ag::Tensor<float> x = ag::Tensor<float>::empty({config_.batch_size, d_});
  std::copy(buffer_.begin() + off, buffer_.begin() + off + config_.batch_size * d_, x.data());
  return x;
}

std::vector<float> ModelActivations::mean() {
  fill(0);
  std::vector<double> sum(static_cast<size_t>(d_), 0.0);
  const int64_t rows = static_cast<int64_t>(buffer_.size()) / d_;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < d_; ++k) sum[k] += buffer_[r * d_ + k];
  std::vector<float> m(sum.size());
  for (size_t k = 0; k < m.size(); ++k) m[k] = static_cast<float>(sum[k] / rows);
  return m;
}

float ModelActivations::norm_scale() {
  fill(0);
  return activation_scale(buffer_, d_);
}

SyntheticFeatures::SyntheticFeatures(int64_t n, int64_t d, double p, uint64_t seed)
    : n_(n), d_(d), p_(p), seed_(seed), dirs_(static_cast<size_t>(n * d)) {
  ag::Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int64_t k = 0; k < d; ++k) {
      const double v = rng.normal();
      dirs_[i * d + k] = static_cast<float>(v);
      norm += v * v;
    }
    const double inv = 1 / std::sqrt(norm);
    for (int64_t k = 0; k < d; ++k) dirs_[i * d + k] = static_cast<float>(dirs_[i * d + k] * inv);
  }
}

ag::Tensor<float> SyntheticFeatures::batch(int64_t step, int64_t rows, std::vector<float>* truth) const {
  ag::Rng rng(stream_seed(seed_, 0x7157AB1E7157AB1Eull, step));
  ag::Tensor<float> x = ag::Tensor<float>::zeros({rows, d_});
  if (truth) truth->assign(static_cast<size_t>(rows * n_), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x.data() + r * d_;
    for (int64_t i = 0; i < n_; ++i) {
      if (rng.uniform() >= p_) continue;
      const float a = static_cast<float>(rng.uniform());
      if (truth) (*truth)[r * n_ + i] = a;
      const float* dir = dirs_.data() + i * d_;
      for (int64_t k = 0; k < d_; ++k) xr[k] += a * dir[k];
    }
  }
  return x;
}

}  // namespace study
