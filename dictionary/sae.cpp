#include "dictionary/sae.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "dictionary/trainer_common.h"
#include "io/field_table.h"
#include "io/json_error.h"
#include "io/json_read.h"
#include "train/safetensors.h"

namespace dictionary {

namespace {

using json = nlohmann::json;

// The SAE config's table (io/field_table.h): type, range and meaning of every field, read with the same
// one-line messages as a run's config.
const io::Table<SaeConfig>& sae_config_fields() {
  static const io::Table<SaeConfig> fields = {
      {"d_sae", &SaeConfig::d_sae, "features; 0: `expansion` x d_in", io::at_least(0).up_to(1 << 20)},
      {"expansion", &SaeConfig::expansion, "d_sae / d_in when d_sae is 0", io::at_least(1).up_to(256)},
      {"activation",
       io::named(&SaeConfig::activation, {{SaeActivation::relu, "relu"},
                                          {SaeActivation::topk, "topk"},
                                          {SaeActivation::batchtopk, "batchtopk"},
                                          {SaeActivation::jumprelu, "jumprelu"}}),
       "the encoder's nonlinearity: relu with the L1 penalty, topk (k active features per token), "
       "batchtopk (k N over a batch of N; a threshold at inference) or jumprelu (a learnt threshold per "
       "feature, with the L0 penalty)"},
      {"normalize_activations",
       io::named(&SaeConfig::normalize_activations,
                 {{SaeNormalize::none, "none"},
                  {SaeNormalize::expected_average_only_in, "expected_average_only_in"}}),
       "scale activations by one factor fixed from the first buffer so their mean norm is sqrt(d_in) "
       "(folded into sae.safetensors, which reads raw activations), or not"},
      {"l1_coefficient", &SaeConfig::l1_coefficient, "the L1 penalty's weight (ReLU)",
       io::at_least(0).up_to(1e6)},
      {"k", &SaeConfig::k, "active features per token (TopK; BatchTopK on average)",
       io::at_least(1).up_to(1 << 16)},
      {"l0_coefficient", &SaeConfig::l0_coefficient, "the L0 penalty's weight (JumpReLU)",
       io::at_least(0).up_to(1e6)},
      {"jumprelu_bandwidth", &SaeConfig::jumprelu_bandwidth,
       "the width of the rectangle kernel in the thresholds' pseudo-derivatives (JumpReLU)",
       io::above(0).up_to(1e3)},
      {"jumprelu_init_threshold", &SaeConfig::jumprelu_init_threshold,
       "every feature's starting threshold (JumpReLU)", io::above(0).up_to(1e3)},
      {"topk_threshold_lr", &SaeConfig::topk_threshold_lr,
       "the rate of the moving average of the smallest kept activation, the inference threshold (BatchTopK)",
       io::above(0).up_to(1)},
      {"steps", &SaeConfig::steps, "training steps", io::at_least(1).up_to(double(int64_t(1) << 40))},
      {"batch_size", &SaeConfig::batch_size, "tokens per step", io::at_least(1).up_to(1 << 20)},
      {"lr", &SaeConfig::lr, "AdamW's learning rate after warmup", io::above(0).up_to(10)},
      {"warmup", &SaeConfig::warmup, "linear warmup steps", io::at_least(0).up_to(1 << 30)},
      {"weight_decay", &SaeConfig::weight_decay, "AdamW's decoupled weight decay on W_enc and W_dec",
       io::at_least(0).up_to(10)},
      {"resample_every", &SaeConfig::resample_every, "dead-feature resampling period (steps); 0: never",
       io::at_least(0).up_to(double(int64_t(1) << 40))},
      {"buffer_tokens", &SaeConfig::buffer_tokens, "activations shuffled at a time",
       io::at_least(1, "at least `batch_size`").up_to(double(int64_t(1) << 28))},
      {"skip_bos", &SaeConfig::skip_bos, "leave position 0 (BOS) out of training, evaluation and splicing"},
      {"eval_sequences", &SaeConfig::eval_sequences, "held-out sequences for eval.json and features.json",
       io::at_least(1).up_to(1 << 20)},
      {"top_examples", &SaeConfig::top_examples, "top-activating examples per feature (one per sequence)",
       io::at_least(1).up_to(100)},
      {"checkpoint_every", &SaeConfig::checkpoint_every, "steps between checkpoints (and at the end)",
       io::at_least(1).up_to(1 << 30)},
      {"seed", &SaeConfig::seed, "the SAE's initialisation, the activation stream, resampling"},
      {"skip", &SaeConfig::skip, "transcoders: also a linear skip W_skip from input to output (not SAEs)"},
  };
  return fields;
}

// AdamW's parameters in checkpoint order: W_enc, b_enc, W_dec, b_dec, then W_skip when there is one, then
// JumpReLU's log_threshold when it is defined.
std::vector<train::OptimParam> optim_params(SaeParams<float>& p, ag::Tensor<float>& log_threshold) {
  std::vector<train::OptimParam> params = {{"W_enc", &p.W_enc, true},
                                           {"b_enc", &p.b_enc, false},
                                           {"W_dec", &p.W_dec, true},
                                           {"b_dec", &p.b_dec, false}};
  if (p.W_skip.defined()) params.push_back({"W_skip", &p.W_skip, true});
  if (log_threshold.defined()) params.push_back({"log_threshold", &log_threshold, false});
  return params;
}

// JumpReLU's starting log_threshold (log of jumprelu_init_threshold for every feature), trained; undefined
// for the other activations.
ag::Tensor<float> init_log_threshold(const SaeConfig& c, int64_t d_sae) {
  if (c.activation != SaeActivation::jumprelu) return {};
  ag::Tensor<float> t = ag::Tensor<float>::empty({d_sae});
  for (int64_t j = 0; j < d_sae; ++j) t.data()[j] = static_cast<float>(std::log(c.jumprelu_init_threshold));
  t.set_requires_grad(true);
  return t;
}

// x times s, as a new tensor (x itself when s is 1).
ag::Tensor<float> scaled(const ag::Tensor<float>& x, float s) {
  if (s == 1.f) return x;
  ag::Tensor<float> y = x.detach();
  for (int64_t i = 0; i < y.numel(); ++i) y.data()[i] *= s;
  return y;
}

}  // namespace

SaeConfig sae_config_from_json(const json& j, const std::string& source) {
  SaeConfig c = io::read_table(j, sae_config_fields(), source);
  if (c.buffer_tokens < c.batch_size)
    throw io::field_error(source,
                          {"/buffer_tokens", "expected at least batch_size (" + std::to_string(c.batch_size) +
                                                 "), got " + std::to_string(c.buffer_tokens)});
  return c;
}

SaeConfig load_sae_config(const std::string& path) {
  return sae_config_from_json(io::load_json_file(path, io::kMaxJsonFileBytes, "an SAE config file"), path);
}

json sae_config_to_json(const SaeConfig& c) {
  return io::fields_to_json(sae_config_fields(), c);
}

std::vector<io::FieldInfo> sae_config_field_infos() {
  std::vector<io::FieldInfo> infos;
  io::add_field_infos(infos, "", sae_config_fields());
  return infos;
}

SaeParams<float> init_sae(int64_t d_in, int64_t d_sae, ag::Rng& rng, const std::vector<float>& mean) {
  SaeParams<float> p;
  p.W_dec = ag::Tensor<float>::empty({d_sae, d_in});
  for (int64_t i = 0; i < p.W_dec.numel(); ++i) p.W_dec.data()[i] = static_cast<float>(rng.normal());
  normalize_decoder(p);
  p.W_enc = ag::transpose(p.W_dec).detach();
  p.b_enc = ag::Tensor<float>::zeros({d_sae});
  p.b_dec = mean.empty() ? ag::Tensor<float>::zeros({d_in}) : ag::Tensor<float>::from({d_in}, mean);
  for (ag::Tensor<float>* t : {&p.W_enc, &p.b_enc, &p.W_dec, &p.b_dec}) t->set_requires_grad(true);
  return p;
}

SaeParams<float> init_transcoder(const DictShape& shape, int64_t d_sae, ag::Rng& rng,
                                 const std::vector<float>& out_mean) {
  SaeParams<float> p;
  p.transcoder = true;
  p.W_dec = ag::Tensor<float>::empty({d_sae, shape.d_out});
  for (int64_t i = 0; i < p.W_dec.numel(); ++i) p.W_dec.data()[i] = static_cast<float>(rng.normal());
  normalize_decoder(p);
  p.W_enc = ag::Tensor<float>::empty({shape.d_in, d_sae});
  for (int64_t i = 0; i < p.W_enc.numel(); ++i) p.W_enc.data()[i] = static_cast<float>(rng.normal());
  auto W = ag::MatMap<float>(p.W_enc.data(), shape.d_in, d_sae);
  for (int64_t j = 0; j < d_sae; ++j) W.col(j) /= std::max(W.col(j).norm(), 1e-12f);
  p.b_enc = ag::Tensor<float>::zeros({d_sae});
  p.b_dec = out_mean.empty() ? ag::Tensor<float>::zeros({shape.d_out})
                             : ag::Tensor<float>::from({shape.d_out}, out_mean);
  if (shape.skip) p.W_skip = ag::Tensor<float>::zeros({shape.d_in, shape.d_out});
  for (ag::Tensor<float>* t : {&p.W_enc, &p.b_enc, &p.W_dec, &p.b_dec, &p.W_skip})
    if (t->defined()) t->set_requires_grad(true);
  return p;
}

template <typename T>
SaeOutput<T> sae_forward(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, T coefficient,
                         int k, const ag::Tensor<T>& y, T bandwidth, bool training) {
  if (x.dim() != 2 || x.size(1) != p.d_in())
    throw std::invalid_argument("sae_forward: x must be (N, " + std::to_string(p.d_in()) + ")");
  const int64_t N = x.size(0);
  if (y.defined() && (y.dim() != 2 || y.size(0) != N || y.size(1) != p.d_out()))
    throw std::invalid_argument("sae_forward: y must be (" + std::to_string(N) + ", " +
                                std::to_string(p.d_out()) + ")");
  SaeOutput<T> out;
  // A transcoder's encoder reads x itself: the centre is a zero constant.
  const ag::Tensor<T> pre = ag::sparse_grad_linear(
      x, p.transcoder ? ag::Tensor<T>::zeros({p.d_in()}) : p.b_dec, p.W_enc, p.b_enc);  // (N, d_sae)
  const bool thresholded = act == SaeActivation::jumprelu || (act == SaeActivation::batchtopk && !training);
  if (thresholded && !(p.threshold.defined() && p.threshold.numel() == p.d_sae()))
    throw std::invalid_argument("sae_forward: jumprelu and batchtopk need a threshold of d_sae entries");
  if (act == SaeActivation::topk)
    out.f = ag::topk_relu(pre, k);
  else if (act == SaeActivation::batchtopk && training)
    out.f = ag::batch_topk_relu(pre, static_cast<int64_t>(k) * N);
  else if (thresholded)
    out.f = ag::jumprelu(pre, p.threshold, bandwidth);
  else
    out.f = ag::relu(pre);
  // (N, d_out); relu(f) = f. JumpReLU's threshold reads d f at inactive entries too (those within the
  // kernel's window below it), which relu_decode's sparse backward leaves at 0: its training decodes densely.
  out.x_hat = (act == SaeActivation::jumprelu && training ? ag::matmul(out.f, p.W_dec)
                                                          : ag::relu_decode(out.f, p.W_dec)) +
              p.b_dec;
  if (p.W_skip.defined()) out.x_hat = out.x_hat + ag::matmul(x, p.W_skip);
  const ag::Tensor<T> diff = out.x_hat - (y.defined() ? y : x);
  out.mse = ag::scale(ag::sum(diff * diff), T(1) / static_cast<T>(N));
  out.sparsity = ag::scale(ag::sum(out.f), T(1) / static_cast<T>(N));
  if (act == SaeActivation::relu)
    out.loss = out.mse + ag::scale(out.sparsity, coefficient);
  else if (act == SaeActivation::jumprelu && coefficient != T(0))  // L0: sum over features, mean over tokens
    out.loss =
        out.mse + ag::scale(ag::sum(ag::jumprelu_step(pre, p.threshold, bandwidth)), coefficient / T(N));
  else
    out.loss = out.mse;
  return out;
}

void normalize_decoder(SaeParams<float>& p) {
  auto W = ag::MatMap<float>(p.W_dec.data(), p.W_dec.size(0), p.W_dec.size(1));
  for (int64_t r = 0; r < W.rows(); ++r) {
    const float n = W.row(r).norm();
    if (n > 0) W.row(r) /= n;
  }
}

float activation_scale(const std::vector<float>& rows, int64_t d) {
  const int64_t n = static_cast<int64_t>(rows.size()) / d;
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    double sq = 0;
    for (int64_t k = 0; k < d; ++k) sq += double(rows[r * d + k]) * rows[r * d + k];
    sum += std::sqrt(sq);
  }
  const double mean = n > 0 ? sum / n : 0;
  return mean > 0 ? static_cast<float>(std::sqrt(static_cast<double>(d)) / mean) : 1.f;
}

SaeParams<float> fold_activation_scale(const SaeParams<float>& p, float scale) {
  return fold_activation_scales(p, scale, scale);
}

SaeParams<float> fold_activation_scales(const SaeParams<float>& p, float in_scale, float out_scale) {
  SaeParams<float> q{p.W_enc.detach(),
                     p.b_enc.detach(),
                     p.W_dec.detach(),
                     p.b_dec.detach(),
                     p.W_skip.defined() ? p.W_skip.detach() : ag::Tensor<float>(),
                     p.transcoder,
                     p.threshold.defined() ? p.threshold.detach() : ag::Tensor<float>(),
                     p.writes};
  if (p.transcoder && in_scale != out_scale) {
    const float r = in_scale / out_scale;
    for (ag::Tensor<float>* t : {&q.W_enc, &q.W_skip})
      if (t->defined())
        for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] *= r;
  }
  if (out_scale == 1.f) return q;
  for (ag::Tensor<float>* t : {&q.b_enc, &q.b_dec, &q.threshold})
    if (t->defined())
      for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] /= out_scale;
  return q;
}

SaeTrainer::SaeTrainer(const SaeConfig& config, int64_t d_in, const std::vector<float>& data_mean,
                       float activation_scale)
    : config_(config),
      p_([&] {
        ag::Rng rng(config.seed);
        std::vector<float> mean = data_mean;
        for (float& v : mean) v *= activation_scale;
        return init_sae(d_in, config.features(d_in), rng, mean);
      }()),
      log_threshold_(init_log_threshold(config, p_.d_sae())),
      optimizer_(optim_params(p_, log_threshold_), config.weight_decay),
      fired_(static_cast<size_t>(p_.d_sae()), 0),
      scale_(activation_scale),
      out_scale_(activation_scale) {
  init_threshold();
}

SaeTrainer::SaeTrainer(const SaeConfig& config, const DictShape& shape, const std::vector<float>& out_mean,
                       float in_scale, float out_scale)
    : config_(config),
      p_([&] {
        ag::Rng rng(config.seed);
        std::vector<float> mean = out_mean;
        for (float& v : mean) v *= out_scale;
        DictShape s = shape;
        s.skip = config.skip;
        return init_transcoder(s, config.features(shape.d_in), rng, mean);
      }()),
      log_threshold_(init_log_threshold(config, p_.d_sae())),
      optimizer_(optim_params(p_, log_threshold_), config.weight_decay),
      fired_(static_cast<size_t>(p_.d_sae()), 0),
      scale_(in_scale),
      out_scale_(out_scale) {
  init_threshold();
}

void SaeTrainer::init_threshold() {
  if (log_threshold_.defined())
    p_.threshold = ag::exp(log_threshold_).detach();
  else if (config_.activation == SaeActivation::batchtopk)
    p_.threshold = ag::Tensor<float>::zeros({p_.d_sae()});  // SAELens's topk_threshold starts at 0
}

SaeTrainer::StepResult SaeTrainer::step(const ag::Tensor<float>& raw) {
  return step(raw, ag::Tensor<float>());
}

SaeTrainer::StepResult SaeTrainer::step(const ag::Tensor<float>& raw, const ag::Tensor<float>& raw_y) {
  const ag::Tensor<float> x = scaled(raw, scale_);
  const ag::Tensor<float> y = raw_y.defined() ? scaled(raw_y, out_scale_) : ag::Tensor<float>();
  for (const train::OptimParam& o : optim_params(p_, log_threshold_)) o.tensor->zero_grad();
  // JumpReLU's threshold is exp(log_threshold) in the graph, so the pseudo-derivatives reach log_threshold.
  if (log_threshold_.defined()) p_.threshold = ag::exp(log_threshold_);
  SaeOutput<float> out = sae_forward(p_, x, config_.activation, sparsity_coefficient(config_), config_.k, y,
                                     static_cast<float>(config_.jumprelu_bandwidth), true);
  out.loss.backward();
  optimizer_.step(sae_lr(config_, step_));
  normalize_decoder(p_);
  if (log_threshold_.defined()) p_.threshold = ag::exp(log_threshold_).detach();
  if (config_.activation == SaeActivation::batchtopk)
    update_batch_threshold(p_.threshold, out.f, config_.topk_threshold_lr);
  const int64_t N = x.size(0);
  const int64_t active = count_fired(out.f, fired_);
  ++step_;
  int resampled = 0;
  if (config_.resample_every > 0 && step_ % config_.resample_every == 0 && step_ < config_.steps) {
    resampled = y.defined() ? resample_dead(x, y, out.x_hat) : resample_dead(x, out.x_hat);
    std::fill(fired_.begin(), fired_.end(), 0);
  }
  return {out.loss.item(), out.mse.item(), static_cast<float>(active) / N, resampled};
}

int SaeTrainer::resample_dead(const ag::Tensor<float>& x, const ag::Tensor<float>& x_hat) {
  return resample_dead(x, x, x_hat);
}

int SaeTrainer::resample_dead(const ag::Tensor<float>& in, const ag::Tensor<float>& x,
                              const ag::Tensor<float>& x_hat) {
  const int64_t N = x.size(0), D = p_.d_out(), Din = p_.d_in(), M = p_.d_sae();
  std::vector<int64_t> dead;
  for (int64_t j = 0; j < M; ++j)
    if (fired_[j] == 0) dead.push_back(j);
  if (dead.empty()) return 0;
  // Each token's squared error, the cumulative weights to draw from.
  std::vector<double> cum(N);
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    double e = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double v = double(x.data()[r * D + d]) - x_hat.data()[r * D + d];
      e += v * v;
    }
    total += e;
    cum[r] = total;
  }
  if (!(total > 0)) return 0;
  auto W_enc = ag::MatMap<float>(p_.W_enc.data(), Din, M);
  const float enc_norm = resampled_encoder_norm(p_.W_enc, fired_);
  ag::Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step_)));
  auto& m = optimizer_.first_moments();
  auto& v = optimizer_.second_moments();
  for (int64_t j : dead) {
    const double u = rng.uniform() * total;
    const int64_t r = std::min<int64_t>(std::lower_bound(cum.begin(), cum.end(), u) - cum.begin(), N - 1);
    double n2 = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double e = double(x.data()[r * D + d]) - x_hat.data()[r * D + d];
      n2 += e * e;
    }
    const float inv = n2 > 0 ? static_cast<float>(1 / std::sqrt(n2)) : 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const float dir = (x.data()[r * D + d] - x_hat.data()[r * D + d]) * inv;
      p_.W_dec.data()[j * D + d] = dir;
      m[2][j * D + d] = v[2][j * D + d] = 0;
    }
    // The encoder column: the same direction for an SAE; a transcoder's from its input row.
    double in2 = 0;
    for (int64_t d = 0; d < Din; ++d) in2 += double(in.data()[r * Din + d]) * in.data()[r * Din + d];
    const float in_inv = in2 > 0 ? static_cast<float>(1 / std::sqrt(in2)) : 0.f;
    for (int64_t d = 0; d < Din; ++d) {
      W_enc(d, j) = (p_.transcoder ? in.data()[r * Din + d] * in_inv : p_.W_dec.data()[j * D + d]) * enc_norm;
      m[0][d * M + j] = v[0][d * M + j] = 0;
    }
    p_.b_enc.data()[j] = 0;
    m[1][j] = v[1][j] = 0;
    if (log_threshold_.defined()) {  // JumpReLU: the starting threshold again (its moments are the last)
      log_threshold_.data()[j] = static_cast<float>(std::log(config_.jumprelu_init_threshold));
      m.back()[j] = v.back()[j] = 0;
      p_.threshold.data()[j] = static_cast<float>(config_.jumprelu_init_threshold);
    }
  }
  return static_cast<int>(dead.size());
}

void SaeTrainer::save_checkpoint(const std::string& path,
                                 const std::map<std::string, std::string>& metadata) const {
  auto& self = const_cast<SaeTrainer&>(*this);
  std::vector<train::NamedArray> arrays =
      adam_arrays(optim_params(self.p_, self.log_threshold_), self.optimizer_);
  std::vector<float> fired(fired_.begin(), fired_.end());  // counts up to 2^24 are exact
  arrays.push_back({"fired", {p_.d_sae()}, fired});
  // BatchTopK's threshold is no parameter: its moving average is state.
  if (config_.activation == SaeActivation::batchtopk)
    arrays.push_back({"threshold", {p_.d_sae()}, p_.threshold.to_vector()});
  train::write_safetensors(
      path, arrays,
      checkpoint_metadata(metadata, step_, optimizer_.steps_taken(), scale_, p_.transcoder, out_scale_));
}

void SaeTrainer::load_checkpoint(const std::string& path) {
  const train::SafetensorsFile file = train::read_safetensors(path);
  const int64_t M = p_.d_sae();
  const std::vector<train::OptimParam> ps = optim_params(p_, log_threshold_);
  TensorShapes expected = adam_shapes(ps);
  expected.push_back({"fired", {M}});
  const bool batch_threshold = config_.activation == SaeActivation::batchtopk;
  if (batch_threshold) expected.push_back({"threshold", {M}});
  train::expect_tensors(file, expected, path);
  // A corrupt checkpoint is refused before anything is restored: every value finite, the second moments
  // and fire counts non-negative (counts whole), the steps within the config's.
  check_checkpoint_values(file, expected, path);
  const CheckpointCounts counts = read_checkpoint_counts(file, path, config_.steps, false, p_.transcoder);
  restore_adam(file, ps, optimizer_);
  if (log_threshold_.defined()) p_.threshold = ag::exp(log_threshold_).detach();
  if (batch_threshold) {
    const std::vector<float>& t = file.find("threshold")->data;
    std::copy(t.begin(), t.end(), p_.threshold.data());
  }
  const std::vector<float>& fired = file.find("fired")->data;
  for (int64_t j = 0; j < M; ++j) fired_[j] = static_cast<int64_t>(fired[j]);
  step_ = static_cast<int64_t>(counts.step);
  scale_ = static_cast<float>(counts.scale);
  out_scale_ = static_cast<float>(counts.out_scale);
  optimizer_.set_steps_taken(static_cast<int64_t>(counts.adam_steps));
}

void write_sae_file(const std::string& path, const SaeParams<float>& p,
                    const std::map<std::string, std::string>& metadata) {
  std::vector<train::NamedArray> arrays = {{"W_enc", p.W_enc.shape(), p.W_enc.to_vector()},
                                           {"b_enc", p.b_enc.shape(), p.b_enc.to_vector()},
                                           {"W_dec", p.W_dec.shape(), p.W_dec.to_vector()},
                                           {"b_dec", p.b_dec.shape(), p.b_dec.to_vector()}};
  std::map<std::string, std::string> meta = metadata;
  if (p.W_skip.defined()) arrays.push_back({"W_skip", p.W_skip.shape(), p.W_skip.to_vector()});
  if (p.threshold.defined()) arrays.push_back({"threshold", p.threshold.shape(), p.threshold.to_vector()});
  if (p.transcoder) meta["architecture"] = p.W_skip.defined() ? "skip_transcoder" : "transcoder";
  if (p.writes > 1) {  // circuit-tracer's layout: W_dec (d_sae, writes, d_out)
    arrays[2].shape = {p.d_sae(), p.writes, p.d_out()};
    meta["architecture"] = p.W_skip.defined() ? "skip_cross_layer_transcoder" : "cross_layer_transcoder";
  }
  train::write_safetensors(path, arrays, meta);
}

SaeParams<float> load_sae(const std::string& path) {
  const train::SafetensorsFile file = train::read_safetensors(path);
  const train::NamedArray* W_enc = file.find("W_enc");
  if (!W_enc) throw std::runtime_error(path + ": missing tensor W_enc");
  if (W_enc->shape.size() != 2 || W_enc->shape[0] < 1 || W_enc->shape[1] < 1)
    throw std::runtime_error(path + ": W_enc: expected a 2-d shape (d_in, d_sae) with both at least 1");
  const int64_t D = W_enc->shape[0], M = W_enc->shape[1];
  const auto arch = file.metadata.find("architecture");
  const std::string architecture = arch == file.metadata.end() ? "sae" : arch->second;
  const bool cross_layer =
      architecture == "cross_layer_transcoder" || architecture == "skip_cross_layer_transcoder";
  if (architecture != "sae" && architecture != "transcoder" && architecture != "skip_transcoder" &&
      !cross_layer)
    throw std::runtime_error(path +
                             ": metadata architecture: expected transcoder, skip_transcoder, "
                             "cross_layer_transcoder or skip_cross_layer_transcoder, got " +
                             architecture);
  const bool transcoder = architecture != "sae",
             skip = architecture == "skip_transcoder" || architecture == "skip_cross_layer_transcoder";
  int64_t Dout = D, writes = 1;
  if (transcoder) {
    const train::NamedArray* W_dec = file.find("W_dec");
    if (!W_dec) throw std::runtime_error(path + ": missing tensor W_dec");
    const size_t dims = cross_layer ? 3 : 2;
    if (W_dec->shape.size() != dims || W_dec->shape.back() < 1 || (cross_layer && W_dec->shape[1] < 1))
      throw std::runtime_error(path + ": W_dec: expected a " + std::to_string(dims) + "-d shape (d_sae, " +
                               (cross_layer ? "layers, " : "") + "d_out) with each at least 1");
    Dout = W_dec->shape.back();
    if (cross_layer) writes = W_dec->shape[1];
  }
  std::vector<int64_t> dec_shape = {M, Dout};
  if (cross_layer) dec_shape = {M, writes, Dout};
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"W_enc", {D, M}}, {"b_enc", {M}}, {"W_dec", dec_shape}, {"b_dec", {Dout}}};
  if (skip) expected.push_back({"W_skip", {D, Dout}});
  // A JumpReLU or BatchTopK dictionary has its threshold (SAELens's JumpReLU format).
  const bool thresholded = file.find("threshold") != nullptr;
  if (thresholded) expected.push_back({"threshold", {M}});
  train::expect_tensors(file, expected, path);
  SaeParams<float> p;
  p.transcoder = transcoder;
  auto take = [&](const char* name) {
    const train::NamedArray* a = file.find(name);
    for (float v : a->data)
      if (!std::isfinite(v)) throw std::runtime_error(path + ": " + name + ": a value is not finite");
    return ag::Tensor<float>::from(a->shape, a->data);
  };
  p.W_enc = take("W_enc");
  p.b_enc = take("b_enc");
  p.W_dec = take("W_dec");
  if (cross_layer) {  // held as (d_sae, writes * d_out): the same values in the same order
    p.writes = writes;
    p.W_dec = ag::reshape(p.W_dec, {M, writes * Dout});
  }
  p.b_dec = take("b_dec");
  if (skip) p.W_skip = take("W_skip");
  if (thresholded) {
    p.threshold = take("threshold");
    for (int64_t j = 0; j < M; ++j)
      if (p.threshold.data()[j] < 0) throw std::runtime_error(path + ": threshold: a value is negative");
  }
  return p;
}

template SaeOutput<float> sae_forward(const SaeParams<float>&, const ag::Tensor<float>&, SaeActivation, float,
                                      int, const ag::Tensor<float>&, float, bool);
template SaeOutput<double> sae_forward(const SaeParams<double>&, const ag::Tensor<double>&, SaeActivation,
                                       double, int, const ag::Tensor<double>&, double, bool);

}  // namespace dictionary
