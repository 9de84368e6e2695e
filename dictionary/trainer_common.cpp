#include "dictionary/trainer_common.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dictionary {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

double sae_lr(const SaeConfig& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) return c.lr * static_cast<double>(step + 1) / c.warmup;
  return c.lr;
}

float sparsity_coefficient(const SaeConfig& c) {
  return static_cast<float>(c.activation == SaeActivation::jumprelu ? c.l0_coefficient : c.l1_coefficient);
}

void update_batch_threshold(ag::Tensor<float>& threshold, const ag::Tensor<float>& f, double lr) {
  float smallest = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    if (f.data()[i] > 0 && (smallest == 0 || f.data()[i] < smallest)) smallest = f.data()[i];
  if (smallest > 0) {
    const float t = static_cast<float>((1 - lr) * threshold.data()[0] + lr * smallest);
    for (int64_t j = 0; j < threshold.numel(); ++j) threshold.data()[j] = t;
  }
}

int64_t count_fired(const ag::Tensor<float>& f, std::vector<int64_t>& fired) {
  const int64_t M = static_cast<int64_t>(fired.size()), N = f.numel() / M;
  int64_t active = 0;
  for (int64_t r = 0; r < N; ++r) {
    const float* row = f.data() + r * M;
    for (int64_t j = 0; j < M; ++j) {  // no branch: the loop vectorises
      const int64_t on = row[j] > 0;
      fired[j] += on;
      active += on;
    }
  }
  return active;
}

float resampled_encoder_norm(const ag::Tensor<float>& W_enc, const std::vector<int64_t>& fired) {
  const int64_t M = static_cast<int64_t>(fired.size());
  const auto W = ag::ConstMatMap<float>(W_enc.data(), W_enc.numel() / M, M);
  double alive_norm = 0;
  int64_t alive = 0;
  for (int64_t j = 0; j < M; ++j)
    if (fired[j] > 0) {
      alive_norm += W.col(j).norm();
      ++alive;
    }
  return static_cast<float>(0.2 * (alive > 0 ? alive_norm / alive : 1.0));
}

std::vector<train::NamedArray> adam_arrays(const std::vector<train::OptimParam>& ps,
                                           train::AdamW& optimizer) {
  std::vector<train::NamedArray> arrays;
  for (size_t i = 0; i < ps.size(); ++i) {
    arrays.push_back({ps[i].name, ps[i].tensor->shape(), ps[i].tensor->to_vector()});
    arrays.push_back({"adam_m." + ps[i].name, ps[i].tensor->shape(), optimizer.first_moments()[i]});
    arrays.push_back({"adam_v." + ps[i].name, ps[i].tensor->shape(), optimizer.second_moments()[i]});
  }
  return arrays;
}

TensorShapes adam_shapes(const std::vector<train::OptimParam>& ps) {
  TensorShapes expected;
  for (const train::OptimParam& o : ps)
    for (const std::string prefix : {"", "adam_m.", "adam_v."})
      expected.push_back({prefix + o.name, o.tensor->shape()});
  return expected;
}

std::map<std::string, std::string> checkpoint_metadata(std::map<std::string, std::string> metadata,
                                                       int64_t step, int64_t adam_steps, float scale,
                                                       bool write_out_scale, float out_scale) {
  metadata["step"] = train::u64_to_metadata(static_cast<uint64_t>(step));
  metadata["adam_steps"] = train::u64_to_metadata(static_cast<uint64_t>(adam_steps));
  metadata["activation_scale"] = train::f64_bits_to_metadata(scale);
  if (write_out_scale) metadata["activation_scale_out"] = train::f64_bits_to_metadata(out_scale);
  return metadata;
}

void check_checkpoint_values(const train::SafetensorsFile& file, const TensorShapes& expected,
                             const std::string& path) {
  for (const auto& [name, shape] : expected) {
    const bool count = name == "fired" || starts_with(name, "fired.");
    const bool non_negative =
        starts_with(name, "adam_v.") || count || name == "threshold" || starts_with(name, "threshold.");
    for (const float v : file.find(name)->data) {
      if (!std::isfinite(v)) throw std::runtime_error(path + ": " + name + ": a value is not finite");
      if (non_negative && v < 0) throw std::runtime_error(path + ": " + name + ": a value is negative");
      if (count && v != std::floor(v))
        throw std::runtime_error(path + ": " + name + ": a count is not a whole number");
    }
  }
}

CheckpointCounts read_checkpoint_counts(const train::SafetensorsFile& file, const std::string& path,
                                        int64_t max_steps, bool scales_required, bool read_out_scale) {
  CheckpointCounts c;
  c.step = train::metadata_u64(file, "step", path);
  c.adam_steps = train::metadata_u64(file, "adam_steps", path);
  auto read_scale = [&](const char* key) {
    double scale = 1;
    if (scales_required || file.metadata.count(key)) {
      scale = train::metadata_f64_bits(file, key, path);
      if (!(std::isfinite(scale) && scale > 0 && scale < 3.4e38))
        throw std::runtime_error(path + ": metadata " + key + ": expected a positive finite number");
    }
    return scale;
  };
  c.scale = read_scale("activation_scale");
  c.out_scale = read_out_scale ? read_scale("activation_scale_out") : c.scale;
  if (c.step > static_cast<uint64_t>(max_steps))
    throw std::runtime_error(path + ": metadata step: expected at most the config's steps (" +
                             std::to_string(max_steps) + "), got " + std::to_string(c.step));
  if (c.adam_steps > c.step)
    throw std::runtime_error(path + ": metadata adam_steps: expected at most step (" +
                             std::to_string(c.step) + "), got " + std::to_string(c.adam_steps));
  return c;
}

void restore_adam(const train::SafetensorsFile& file, const std::vector<train::OptimParam>& ps,
                  train::AdamW& optimizer) {
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::vector<float>& w = file.find(ps[i].name)->data;
    std::copy(w.begin(), w.end(), ps[i].tensor->data());
    optimizer.first_moments()[i] = file.find("adam_m." + ps[i].name)->data;
    optimizer.second_moments()[i] = file.find("adam_v." + ps[i].name)->data;
  }
}

}  // namespace dictionary
