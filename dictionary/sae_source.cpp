#include "dictionary/sae_source.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/hooks.h"

namespace dictionary {

namespace {

// Sequences per forward when filling a buffer.
constexpr int kSequencesPerForward = 64;

uint64_t stream_seed(uint64_t seed, uint64_t salt, int64_t index) {
  return seed ^ salt ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index + 1));
}

// The positions a dictionary reads, in order: every (sequence, position) of the batch but padding (and
// position 0 when skip_bos), into rows.seq and rows.pos.
void select_positions(const train::Batch& batch, bool skip_bos, ActivationRows& rows) {
  for (int b = 0; b < batch.B; ++b)
    for (int t = skip_bos ? 1 : 0; t < batch.T; ++t) {
      if (!batch.is_padding.empty() && batch.is_padding[static_cast<size_t>(b) * batch.T + t]) continue;
      rows.seq.push_back(b);
      rows.pos.push_back(t);
    }
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
  select_positions(batch, skip_bos, rows);
  rows.data.resize(static_cast<size_t>(rows.rows() * rows.d));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const float* src = a.data() + (static_cast<int64_t>(rows.seq[r]) * batch.T + rows.pos[r]) * rows.d;
    std::copy(src, src + rows.d, rows.data.data() + r * rows.d);
  }
  return rows;
}

ActivationRows capture_row_pairs(const nn::CausalLM<float>& model, const train::Batch& batch,
                                 const std::string& point, const std::string& second, bool skip_bos,
                                 int64_t* d_first) {
  ag::NoGradScope no_grad;
  nn::Hooks<float> hooks;
  hooks.capture(point);
  hooks.capture(second);
  model.forward(batch.inputs, batch.B, batch.T, batch.is_padding, &hooks);
  const ag::Tensor<float>* parts[] = {&hooks.captured(point), &hooks.captured(second)};
  for (int i = 0; i < 2; ++i)
    if (parts[i]->dim() != 3 || parts[i]->size(0) != batch.B || parts[i]->size(1) != batch.T)
      throw std::invalid_argument("point " + std::string(i ? second : point) +
                                  ": expected a point of shape (B, T, D)");
  const int64_t d0 = parts[0]->size(2), d1 = parts[1]->size(2);
  *d_first = d0;
  ActivationRows rows;
  rows.d = d0 + d1;
  select_positions(batch, skip_bos, rows);
  rows.data.resize(static_cast<size_t>(rows.rows() * rows.d));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const int64_t at = static_cast<int64_t>(rows.seq[r]) * batch.T + rows.pos[r];
    std::copy(parts[0]->data() + at * d0, parts[0]->data() + (at + 1) * d0, rows.data.data() + r * rows.d);
    std::copy(parts[1]->data() + at * d1, parts[1]->data() + (at + 1) * d1,
              rows.data.data() + r * rows.d + d0);
  }
  return rows;
}

ActivationRows capture_row_groups(const nn::CausalLM<float>& model, const train::Batch& batch,
                                  const std::vector<std::string>& points, bool skip_bos,
                                  std::vector<int64_t>* widths) {
  ag::NoGradScope no_grad;
  nn::Hooks<float> hooks;
  for (const std::string& p : points) hooks.capture(p);
  model.forward(batch.inputs, batch.B, batch.T, batch.is_padding, &hooks);
  ActivationRows rows;
  widths->clear();
  for (const std::string& p : points) {
    const ag::Tensor<float>& a = hooks.captured(p);
    if (a.dim() != 3 || a.size(0) != batch.B || a.size(1) != batch.T)
      throw std::invalid_argument("point " + p + ": expected a point of shape (B, T, D)");
    widths->push_back(a.size(2));
    rows.d += a.size(2);
  }
  select_positions(batch, skip_bos, rows);
  rows.data.resize(static_cast<size_t>(rows.rows() * rows.d));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const int64_t at = static_cast<int64_t>(rows.seq[r]) * batch.T + rows.pos[r];
    float* dst = rows.data.data() + r * rows.d;
    for (size_t i = 0; i < points.size(); ++i) {
      const int64_t w = (*widths)[i];
      const float* src = hooks.captured(points[i]).data() + at * w;
      dst = std::copy(src, src + w, dst);
    }
  }
  return rows;
}

int64_t point_width(const nn::CausalLM<float>& model, const train::Task& task, const std::string& point) {
  ag::Rng rng(1);
  return capture_rows(model, task.sample(rng, 1), point, false).d;
}

ModelActivations::ModelActivations(const nn::CausalLM<float>& model, const train::Task& task,
                                   std::string point, const SaeConfig& config, std::string out_point)
    : model_(model),
      task_(task),
      point_(std::move(point)),
      out_point_(std::move(out_point)),
      config_(config) {
  d_in_ = point_width(model_, task_, point_);
  d_ = out_point_.empty() ? d_in_ : d_in_ + point_width(model_, task_, out_point_);
  steps_per_buffer_ = std::max<int64_t>(1, config_.buffer_tokens / config_.batch_size);
}

ModelActivations::ModelActivations(const nn::CausalLM<float>& model, const train::Task& task,
                                   std::vector<std::string> points, std::vector<std::string> out_points,
                                   const SaeConfig& config)
    : model_(model), task_(task), config_(config) {
  ag::Rng rng(1);
  std::vector<int64_t> widths;
  points_ = points;
  points_.insert(points_.end(), out_points.begin(), out_points.end());
  capture_row_groups(model_, task_.sample(rng, 1), points_, false, &widths);
  for (size_t i = 0; i < points.size(); ++i) d_in_ += widths[i];
  for (int64_t w : widths) d_ += w;
  block_ = widths.at(0);
  point_ = points.at(0);
  steps_per_buffer_ = std::max<int64_t>(1, config_.buffer_tokens / config_.batch_size);
}

void ModelActivations::fill(int64_t index) {
  if (index == buffer_index_) return;
  const int64_t rows = steps_per_buffer_ * config_.batch_size;
  ag::Rng rng(stream_seed(config_.seed, 0x5AE5AE5AE5AE5AEull, index));
  buffer_.clear();
  buffer_.reserve(static_cast<size_t>(rows * d_));
  while (static_cast<int64_t>(buffer_.size()) < rows * d_) {
    const train::Batch sequences = task_.sample(rng, kSequencesPerForward);
    int64_t d_first = 0;
    std::vector<int64_t> widths;
    const ActivationRows a =
        !points_.empty() ? capture_row_groups(model_, sequences, points_, config_.skip_bos, &widths)
        : out_point_.empty()
            ? capture_rows(model_, sequences, point_, config_.skip_bos)
            : capture_row_pairs(model_, sequences, point_, out_point_, config_.skip_bos, &d_first);
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

ag::Tensor<float> ModelActivations::columns(int64_t step, int64_t c0, int64_t c1) {
  fill(step / steps_per_buffer_);
  const int64_t row0 = (step % steps_per_buffer_) * config_.batch_size, w = c1 - c0;
  ag::Tensor<float> x = ag::Tensor<float>::empty({config_.batch_size, w});
  for (int64_t r = 0; r < config_.batch_size; ++r) {
    const auto src = buffer_.begin() + (row0 + r) * d_ + c0;
    std::copy(src, src + w, x.data() + r * w);
  }
  return x;
}

ag::Tensor<float> ModelActivations::batch(int64_t step) {
  return columns(step, 0, d_in_);
}

ag::Tensor<float> ModelActivations::target(int64_t step) {
  return columns(step, d_in_, d_);
}

std::vector<float> ModelActivations::mean() {
  fill(0);
  const int64_t c0 = out_point_.empty() && points_.empty() ? 0 : d_in_, w = d_ - c0;
  std::vector<double> sum(static_cast<size_t>(w), 0.0);
  const int64_t rows = static_cast<int64_t>(buffer_.size()) / d_;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < w; ++k) sum[k] += buffer_[r * d_ + c0 + k];
  std::vector<float> m(sum.size());
  for (size_t k = 0; k < m.size(); ++k) m[k] = static_cast<float>(sum[k] / rows);
  return m;
}

float ModelActivations::norm_scale(bool out) {
  fill(0);
  if (d_ == d_in_) return activation_scale(buffer_, d_);
  const int64_t c0 = out ? d_in_ : 0, w = out ? d_ - d_in_ : d_in_;
  const int64_t rows = static_cast<int64_t>(buffer_.size()) / d_;
  std::vector<float> part(static_cast<size_t>(rows * w));
  for (int64_t r = 0; r < rows; ++r)
    std::copy(buffer_.begin() + r * d_ + c0, buffer_.begin() + r * d_ + c0 + w, part.begin() + r * w);
  return activation_scale(part, points_.empty() ? w : block_);
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

}  // namespace dictionary
