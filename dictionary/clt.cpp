#include "dictionary/clt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "dictionary/trainer_common.h"
#include "train/safetensors.h"

namespace dictionary {

namespace {

// The columns [c0, c0 + w) of x (N, C), as a tensor of its own (no gradient: activations are data).
ag::Tensor<float> columns(const ag::Tensor<float>& x, int64_t c0, int64_t w, float scale) {
  const int64_t N = x.size(0), C = x.size(1);
  ag::Tensor<float> out = ag::Tensor<float>::empty({N, w});
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < w; ++k) out.data()[r * w + k] = x.data()[r * C + c0 + k] * scale;
  return out;
}

// AdamW's parameters of every layer in checkpoint order: per layer W_enc, b_enc, W_dec, b_dec, W_skip when
// there is one, log_threshold when defined; named "l.NAME".
std::vector<train::OptimParam> params_of(std::vector<SaeParams<float>>& p,
                                         std::vector<ag::Tensor<float>>& log_threshold) {
  std::vector<train::OptimParam> out;
  for (size_t l = 0; l < p.size(); ++l) {
    const std::string n = std::to_string(l) + ".";
    out.push_back({n + "W_enc", &p[l].W_enc, true});
    out.push_back({n + "b_enc", &p[l].b_enc, false});
    out.push_back({n + "W_dec", &p[l].W_dec, true});
    out.push_back({n + "b_dec", &p[l].b_dec, false});
    if (p[l].W_skip.defined()) out.push_back({n + "W_skip", &p[l].W_skip, true});
    if (log_threshold[l].defined()) out.push_back({n + "log_threshold", &log_threshold[l], false});
  }
  return out;
}

}  // namespace

template <typename T>
ag::Tensor<T> transcoder_encode(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, int k,
                                T bandwidth, bool training) {
  if (x.dim() != 2 || x.size(1) != p.d_in())
    throw std::invalid_argument("transcoder_encode: x must be (N, " + std::to_string(p.d_in()) + ")");
  const ag::Tensor<T> pre = ag::sparse_grad_linear(x, ag::Tensor<T>::zeros({p.d_in()}), p.W_enc, p.b_enc);
  const bool thresholded = act == SaeActivation::jumprelu || (act == SaeActivation::batchtopk && !training);
  if (thresholded && !(p.threshold.defined() && p.threshold.numel() == p.d_sae()))
    throw std::invalid_argument(
        "transcoder_encode: jumprelu and batchtopk need a threshold of d_sae entries");
  if (act == SaeActivation::topk) return ag::topk_relu(pre, k);
  if (act == SaeActivation::batchtopk && training)
    return ag::batch_topk_relu(pre, static_cast<int64_t>(k) * x.size(0));
  if (thresholded) return ag::jumprelu(pre, p.threshold, bandwidth);
  return ag::relu(pre);
}

template <typename T>
CltOutput<T> clt_forward(const std::vector<SaeParams<T>>& p, const std::vector<ag::Tensor<T>>& x,
                         SaeActivation act, T coefficient, int k, const std::vector<ag::Tensor<T>>& y,
                         T bandwidth, bool training) {
  const size_t L = p.size();
  if (x.size() != L || y.size() != L)
    throw std::invalid_argument("clt_forward: expected one input and one target per layer");
  CltOutput<T> out;
  const int64_t N = x[0].size(0);
  std::vector<std::vector<ag::Tensor<T>>> parts(L);  // parts[l']: the decoded terms into layer l'
  ag::Tensor<T> l0;
  for (size_t l = 0; l < L; ++l) {
    if (p[l].writes != static_cast<int64_t>(L - l))
      throw std::invalid_argument("clt_forward: layer " + std::to_string(l) + " must write to " +
                                  std::to_string(L - l) + " layers");
    out.f.push_back(transcoder_encode(p[l], x[l], act, k, bandwidth, training));
    const ag::Tensor<T> z = act == SaeActivation::jumprelu && training
                                ? ag::matmul(out.f[l], p[l].W_dec)
                                : ag::relu_decode(out.f[l], p[l].W_dec);
    const std::vector<ag::Tensor<T>> blocks =
        L - l == 1 ? std::vector<ag::Tensor<T>>{z}
                   : ag::split(z, std::vector<int64_t>(L - l, p[l].d_out()), 1);
    for (size_t i = 0; i < L - l; ++i) parts[l + i].push_back(blocks[i]);
    const ag::Tensor<T> s = ag::sum(out.f[l]);
    out.sparsity = l == 0 ? s : out.sparsity + s;
    if (act == SaeActivation::jumprelu && coefficient != T(0)) {
      const ag::Tensor<T> n = ag::sum(ag::jumprelu_step(
          ag::sparse_grad_linear(x[l], ag::Tensor<T>::zeros({p[l].d_in()}), p[l].W_enc, p[l].b_enc),
          p[l].threshold, bandwidth));
      l0 = l0.defined() ? l0 + n : n;
    }
  }
  for (size_t l = 0; l < L; ++l) {
    ag::Tensor<T> h = parts[l][0] + p[l].b_dec;
    for (size_t i = 1; i < parts[l].size(); ++i) h = h + parts[l][i];
    if (p[l].W_skip.defined()) h = h + ag::matmul(x[l], p[l].W_skip);
    out.y_hat.push_back(h);
    const ag::Tensor<T> d = h - y[l];
    const ag::Tensor<T> e = ag::sum(d * d);
    out.mse = l == 0 ? e : out.mse + e;
  }
  const T inv = T(1) / static_cast<T>(N);
  out.mse = ag::scale(out.mse, inv);
  out.sparsity = ag::scale(out.sparsity, inv);
  if (act == SaeActivation::relu)
    out.loss = out.mse + ag::scale(out.sparsity, coefficient);
  else if (l0.defined())
    out.loss = out.mse + ag::scale(l0, coefficient * inv);
  else
    out.loss = out.mse;
  return out;
}

ag::Tensor<float> predict_mlp_out(const std::vector<SaeParams<float>>& t, int layer,
                                  const std::vector<ag::Tensor<float>>& f, const ag::Tensor<float>& x) {
  const SaeParams<float>& own = t.at(layer);
  const int64_t n = x.size(0), D = own.d_out();
  ag::Tensor<float> y = ag::Tensor<float>::empty({n, D});
  ag::MatMap<float> Y(y.data(), n, D);
  Y.rowwise() = Eigen::Map<const Eigen::RowVectorXf>(own.b_dec.data(), D);
  if (own.W_skip.defined())
    Y.noalias() += ag::ConstMatMap<float>(x.data(), n, own.d_in()) *
                   ag::ConstMatMap<float>(own.W_skip.data(), own.d_in(), D);
  for (int l = 0; l <= layer; ++l) {
    const SaeParams<float>& p = t[l];
    if (!p.W_enc.defined() || l + p.writes <= layer) continue;
    const int64_t M = p.d_sae(), width = p.writes * D;
    const ag::ConstMatMap<float> F(f[l].data(), n, M);
    const ag::ConstMatMap<float> W(p.W_dec.data(), M, width);
    // Only the active features' rows: F is sparse.
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < M; ++j)
        if (F(r, j) != 0) Y.row(r) += F(r, j) * W.block(j, (layer - l) * D, 1, D);
  }
  return y;
}

CltTrainer::CltTrainer(const SaeConfig& config, int L, int64_t D, const std::vector<float>& out_mean,
                       float in_scale, float out_scale)
    : config_(config),
      L_(L),
      D_(D),
      p_([&] {
        ag::Rng rng(config.seed);
        const int64_t M = config.features(D);
        std::vector<SaeParams<float>> p(L);
        for (int l = 0; l < L; ++l) {
          SaeParams<float>& q = p[l];
          q.transcoder = true;
          q.writes = L - l;
          q.W_dec = ag::Tensor<float>::empty({M, q.writes * D});
          for (int64_t i = 0; i < q.W_dec.numel(); ++i) q.W_dec.data()[i] = static_cast<float>(rng.normal());
          normalize_decoder(q);
          q.W_enc = ag::Tensor<float>::empty({D, M});
          for (int64_t i = 0; i < q.W_enc.numel(); ++i) q.W_enc.data()[i] = static_cast<float>(rng.normal());
          auto W = ag::MatMap<float>(q.W_enc.data(), D, M);
          for (int64_t j = 0; j < M; ++j) W.col(j) /= std::max(W.col(j).norm(), 1e-12f);
          q.b_enc = ag::Tensor<float>::zeros({M});
          q.b_dec = ag::Tensor<float>::zeros({D});
          if (!out_mean.empty())
            for (int64_t k = 0; k < D; ++k) q.b_dec.data()[k] = out_mean[l * D + k] * out_scale;
          if (config.skip) q.W_skip = ag::Tensor<float>::zeros({D, D});
          for (ag::Tensor<float>* t : {&q.W_enc, &q.b_enc, &q.W_dec, &q.b_dec, &q.W_skip})
            if (t->defined()) t->set_requires_grad(true);
          if (config.activation == SaeActivation::batchtopk) q.threshold = ag::Tensor<float>::zeros({M});
        }
        return p;
      }()),
      log_threshold_([&] {
        std::vector<ag::Tensor<float>> t(L);
        if (config.activation == SaeActivation::jumprelu)
          for (int l = 0; l < L; ++l) {
            t[l] = ag::Tensor<float>::empty({p_[l].d_sae()});
            for (int64_t j = 0; j < p_[l].d_sae(); ++j)
              t[l].data()[j] = static_cast<float>(std::log(config.jumprelu_init_threshold));
            t[l].set_requires_grad(true);
            p_[l].threshold = ag::exp(t[l]).detach();
          }
        return t;
      }()),
      optimizer_(params_of(p_, log_threshold_), config.weight_decay),
      fired_(L, std::vector<int64_t>(static_cast<size_t>(config.features(D)), 0)),
      scale_(in_scale),
      out_scale_(out_scale) {
  size_t i = 0;
  for (int l = 0; l < L; ++l) {
    first_param_.push_back(i);
    i += 4 + (p_[l].W_skip.defined() ? 1 : 0) + (log_threshold_[l].defined() ? 1 : 0);
  }
}

std::vector<train::OptimParam> CltTrainer::optim_params() {
  return params_of(p_, log_threshold_);
}

int64_t CltTrainer::n_params() const {
  int64_t n = 0;
  for (const SaeParams<float>& p : p_)
    for (const ag::Tensor<float>* t : {&p.W_enc, &p.b_enc, &p.W_dec, &p.b_dec, &p.W_skip})
      if (t->defined()) n += t->numel();
  return n;
}

std::vector<SaeParams<float>> CltTrainer::raw_params() const {
  std::vector<SaeParams<float>> out;
  for (const SaeParams<float>& p : p_) out.push_back(fold_activation_scales(p, scale_, out_scale_));
  return out;
}

SaeTrainer::StepResult CltTrainer::step(const ag::Tensor<float>& raw_x, const ag::Tensor<float>& raw_y) {
  if (raw_x.dim() != 2 || raw_x.size(1) != L_ * D_ || raw_y.dim() != 2 || raw_y.size(1) != L_ * D_ ||
      raw_y.size(0) != raw_x.size(0))
    throw std::invalid_argument("CltTrainer::step: x and y must be (N, " + std::to_string(L_ * D_) + ")");
  std::vector<ag::Tensor<float>> x, y;
  for (int l = 0; l < L_; ++l) {
    x.push_back(columns(raw_x, l * D_, D_, scale_));
    y.push_back(columns(raw_y, l * D_, D_, out_scale_));
  }
  for (const train::OptimParam& o : optim_params()) o.tensor->zero_grad();
  for (int l = 0; l < L_; ++l)
    if (log_threshold_[l].defined()) p_[l].threshold = ag::exp(log_threshold_[l]);
  CltOutput<float> out = clt_forward(p_, x, config_.activation, sparsity_coefficient(config_), config_.k, y,
                                     static_cast<float>(config_.jumprelu_bandwidth), true);
  out.loss.backward();
  optimizer_.step(sae_lr(config_, step_));
  const int64_t N = raw_x.size(0);
  int64_t active = 0;
  for (int l = 0; l < L_; ++l) {
    normalize_decoder(p_[l]);
    if (log_threshold_[l].defined()) p_[l].threshold = ag::exp(log_threshold_[l]).detach();
    if (config_.activation == SaeActivation::batchtopk)  // SAELens's moving average, per layer
      update_batch_threshold(p_[l].threshold, out.f[l], config_.topk_threshold_lr);
    active += count_fired(out.f[l], fired_[l]);
  }
  ++step_;
  int resampled = 0;
  if (config_.resample_every > 0 && step_ % config_.resample_every == 0 && step_ < config_.steps) {
    resampled = resample_dead(x, y, out.y_hat);
    for (auto& f : fired_) std::fill(f.begin(), f.end(), 0);
  }
  return {out.loss.item(), out.mse.item(), static_cast<float>(active) / N, resampled};
}

int CltTrainer::resample_dead(const std::vector<ag::Tensor<float>>& x,
                              const std::vector<ag::Tensor<float>>& y,
                              const std::vector<ag::Tensor<float>>& y_hat) {
  const int64_t N = x[0].size(0), D = D_;
  auto& m = optimizer_.first_moments();
  auto& v = optimizer_.second_moments();
  int count = 0;
  ag::Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step_)));
  for (int l = 0; l < L_; ++l) {
    SaeParams<float>& p = p_[l];
    const int64_t M = p.d_sae(), width = p.writes * D;
    std::vector<int64_t> dead;
    for (int64_t j = 0; j < M; ++j)
      if (fired_[l][j] == 0) dead.push_back(j);
    if (dead.empty()) continue;
    // Each token's squared error over the layers this one writes to.
    auto err = [&](int64_t r, int64_t i, int64_t k) {
      return double(y[l + i].data()[r * D + k]) - y_hat[l + i].data()[r * D + k];
    };
    std::vector<double> cum(N);
    double total = 0;
    for (int64_t r = 0; r < N; ++r) {
      for (int64_t i = 0; i < p.writes; ++i)
        for (int64_t k = 0; k < D; ++k) total += err(r, i, k) * err(r, i, k);
      cum[r] = total;
    }
    if (!(total > 0)) continue;
    auto W_enc = ag::MatMap<float>(p.W_enc.data(), D, M);
    const float enc_norm = resampled_encoder_norm(p.W_enc, fired_[l]);
    const size_t base = first_param_[l];
    for (int64_t j : dead) {
      const double u = rng.uniform() * total;
      const int64_t r = std::min<int64_t>(std::lower_bound(cum.begin(), cum.end(), u) - cum.begin(), N - 1);
      const double n2 = r > 0 ? cum[r] - cum[r - 1] : cum[0];
      const double inv = n2 > 0 ? 1 / std::sqrt(n2) : 0;
      for (int64_t i = 0; i < p.writes; ++i)
        for (int64_t k = 0; k < D; ++k) {
          const int64_t at = j * width + i * D + k;
          p.W_dec.data()[at] = static_cast<float>(err(r, i, k) * inv);
          m[base + 2][at] = v[base + 2][at] = 0;
        }
      double in2 = 0;
      for (int64_t k = 0; k < D; ++k) in2 += double(x[l].data()[r * D + k]) * x[l].data()[r * D + k];
      const float in_inv = in2 > 0 ? static_cast<float>(1 / std::sqrt(in2)) : 0.f;
      for (int64_t k = 0; k < D; ++k) {
        W_enc(k, j) = x[l].data()[r * D + k] * in_inv * enc_norm;
        m[base][k * M + j] = v[base][k * M + j] = 0;
      }
      p.b_enc.data()[j] = 0;
      m[base + 1][j] = v[base + 1][j] = 0;
      if (log_threshold_[l].defined()) {
        const size_t t = base + 4 + (p.W_skip.defined() ? 1 : 0);
        log_threshold_[l].data()[j] = static_cast<float>(std::log(config_.jumprelu_init_threshold));
        m[t][j] = v[t][j] = 0;
        p.threshold.data()[j] = static_cast<float>(config_.jumprelu_init_threshold);
      }
      ++count;
    }
  }
  return count;
}

void CltTrainer::save_checkpoint(const std::string& path,
                                 const std::map<std::string, std::string>& metadata) const {
  auto& self = const_cast<CltTrainer&>(*this);
  std::vector<train::NamedArray> arrays = adam_arrays(self.optim_params(), self.optimizer_);
  for (int l = 0; l < L_; ++l) {
    const std::string n = std::to_string(l);
    arrays.push_back({"fired." + n, {p_[l].d_sae()}, std::vector<float>(fired_[l].begin(), fired_[l].end())});
    if (config_.activation == SaeActivation::batchtopk)
      arrays.push_back({"threshold." + n, {p_[l].d_sae()}, p_[l].threshold.to_vector()});
  }
  std::map<std::string, std::string> meta =
      checkpoint_metadata(metadata, step_, optimizer_.steps_taken(), scale_, true, out_scale_);
  meta["n_layers"] = std::to_string(L_);
  train::write_safetensors(path, arrays, meta);
}

void CltTrainer::load_checkpoint(const std::string& path) {
  const train::SafetensorsFile file = train::read_safetensors(path);
  const std::vector<train::OptimParam> ps = optim_params();
  TensorShapes expected = adam_shapes(ps);
  for (int l = 0; l < L_; ++l) {
    expected.push_back({"fired." + std::to_string(l), {p_[l].d_sae()}});
    if (config_.activation == SaeActivation::batchtopk)
      expected.push_back({"threshold." + std::to_string(l), {p_[l].d_sae()}});
  }
  train::expect_tensors(file, expected, path);
  check_checkpoint_values(file, expected, path);
  const CheckpointCounts counts = read_checkpoint_counts(file, path, config_.steps, true, true);
  restore_adam(file, ps, optimizer_);
  for (int l = 0; l < L_; ++l) {
    const std::string n = std::to_string(l);
    if (log_threshold_[l].defined()) p_[l].threshold = ag::exp(log_threshold_[l]).detach();
    if (config_.activation == SaeActivation::batchtopk) {
      const std::vector<float>& t = file.find("threshold." + n)->data;
      std::copy(t.begin(), t.end(), p_[l].threshold.data());
    }
    const std::vector<float>& f = file.find("fired." + n)->data;
    for (size_t j = 0; j < f.size(); ++j) fired_[l][j] = static_cast<int64_t>(f[j]);
  }
  step_ = static_cast<int64_t>(counts.step);
  scale_ = static_cast<float>(counts.scale);
  out_scale_ = static_cast<float>(counts.out_scale);
  optimizer_.set_steps_taken(static_cast<int64_t>(counts.adam_steps));
}

template ag::Tensor<float> transcoder_encode(const SaeParams<float>&, const ag::Tensor<float>&, SaeActivation,
                                             int, float, bool);
template ag::Tensor<double> transcoder_encode(const SaeParams<double>&, const ag::Tensor<double>&,
                                              SaeActivation, int, double, bool);
template CltOutput<float> clt_forward(const std::vector<SaeParams<float>>&,
                                      const std::vector<ag::Tensor<float>>&, SaeActivation, float, int,
                                      const std::vector<ag::Tensor<float>>&, float, bool);
template CltOutput<double> clt_forward(const std::vector<SaeParams<double>>&,
                                       const std::vector<ag::Tensor<double>>&, SaeActivation, double, int,
                                       const std::vector<ag::Tensor<double>>&, double, bool);

}  // namespace dictionary
