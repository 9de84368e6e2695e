// Where an SAE's training activations come from: a model's hook point over its run's training
// distribution (streamed: a shuffled buffer of buffer_tokens rows at a time, never the whole stream), or
// a synthetic source with known sparse features (the ground truth the SAE should recover). Both give the
// batch of a step as a function of (seed, step) alone, so a resumed training sees the same batches.
#pragma once

#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "dictionary/sae.h"
#include "nn/transformer.h"
#include "train/tasks.h"

namespace dictionary {

// The rows of activations at one hook point over a batch of sequences: one row per kept token (not
// padding, not position 0 when skip_bos), with the sequence and position it came from.
struct ActivationRows {
  int64_t d = 0;
  std::vector<float> data;  // (rows, d)
  std::vector<int32_t> seq, pos;
  int64_t rows() const { return static_cast<int64_t>(seq.size()); }
};

// The activation at `point` (a point of shape (B, T, D)) for every kept token of `batch`. Throws
// std::invalid_argument naming the point when the model has no such point or it is not (B, T, D).
ActivationRows capture_rows(const nn::CausalLM<float>& model, const train::Batch& batch,
                            const std::string& point, bool skip_bos);

// The rows at two points of one forward, side by side: each row is the activation at `point` (d_first
// values) followed by the one at `second` (d - d_first), for a transcoder's input and target.
ActivationRows capture_row_pairs(const nn::CausalLM<float>& model, const train::Batch& batch,
                                 const std::string& point, const std::string& second, bool skip_bos,
                                 int64_t* d_first);

// The rows at any number of points of one forward, side by side (each row: the activation at points[0],
// then at points[1], ...); each point's width to *widths.
ActivationRows capture_row_groups(const nn::CausalLM<float>& model, const train::Batch& batch,
                                  const std::vector<std::string>& points, bool skip_bos,
                                  std::vector<int64_t>* widths);

// The width D of `point` in `model` (one forward of one sequence); errors as capture_rows.
int64_t point_width(const nn::CausalLM<float>& model, const train::Task& task, const std::string& point);

// A model's activations at a point, streamed from its task's training distribution.
class ModelActivations {
 public:
  // With `out_point`, a transcoder's source: each row holds the activation at `point` and the one at
  // `out_point` of the same token (shuffled together); batch() gives the first, target() the second.
  ModelActivations(const nn::CausalLM<float>& model, const train::Task& task, std::string point,
                   const SaeConfig& config, std::string out_point = "");
  // A cross-layer transcoder's source: each row holds the activation at every one of `points` (of one
  // width D each), then at every one of `out_points`; batch() gives the first group, target() the second.
  // norm_scale() and norm_scale(true) are then over the group's points' rows of D.
  ModelActivations(const nn::CausalLM<float>& model, const train::Task& task, std::vector<std::string> points,
                   std::vector<std::string> out_points, const SaeConfig& config);
  int64_t d_in() const { return d_in_; }
  int64_t d_out() const { return d_ - d_in_; }
  // The batch_size rows of step `step`: buffer step / (buffer_tokens / batch_size), filled from its own
  // seeded stream of sequences and shuffled, then the step's slice of it.
  ag::Tensor<float> batch(int64_t step);
  // A transcoder's targets of step `step` (batch_size, d_out), the rows of batch(step).
  ag::Tensor<float> target(int64_t step);
  // The mean row of the first buffer (b_dec's start); a transcoder's: of the targets.
  std::vector<float> mean();
  // The factor that brings the first buffer's mean row norm to sqrt(d_in) (activation_scale); of the
  // targets' rows to sqrt(d_out) with `out`.
  float norm_scale(bool out = false);

 private:
  void fill(int64_t index);
  const nn::CausalLM<float>& model_;
  const train::Task& task_;
  std::string point_, out_point_;
  std::vector<std::string> points_;  // every point captured, in the row's order
  SaeConfig config_;
  int64_t d_in_ = 0, d_ = 0, steps_per_buffer_ = 1, buffer_index_ = -1;
  int64_t block_ = 0;          // the rows norm_scale averages over: one point's width
  std::vector<float> buffer_;  // (buffer rows, d), shuffled
  ag::Tensor<float> columns(int64_t step, int64_t c0, int64_t c1);
};

// n features in d dimensions: feature i has a random unit direction; on each sample it is active with
// probability p, with a magnitude uniform in [0, 1); x = sum of the active features' magnitude times
// direction.
class SyntheticFeatures {
 public:
  SyntheticFeatures(int64_t n, int64_t d, double p, uint64_t seed);
  // `rows` samples of `step`'s stream (N, d); their true activations (N, n) to `truth` when given.
  ag::Tensor<float> batch(int64_t step, int64_t rows, std::vector<float>* truth = nullptr) const;
  const std::vector<float>& directions() const { return dirs_; }  // (n, d)
  int64_t n() const { return n_; }
  int64_t d() const { return d_; }

 private:
  int64_t n_, d_;
  double p_;
  uint64_t seed_;
  std::vector<float> dirs_;
};

}  // namespace dictionary
