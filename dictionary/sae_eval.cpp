#include "dictionary/sae_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/ops.h"
#include "dictionary/sae_source.h"
#include "nn/hooks.h"
#include "nn/model_view.h"

namespace dictionary {

namespace {

// Sequences per forward in the evaluation.
constexpr int kChunk = 32;

}  // namespace

train::Batch slice(const train::Batch& batch, int b0, int b1) {
  train::Batch out;
  out.B = b1 - b0;
  out.T = batch.T;
  const size_t a = static_cast<size_t>(b0) * batch.T, z = static_cast<size_t>(b1) * batch.T;
  out.inputs.assign(batch.inputs.begin() + a, batch.inputs.begin() + z);
  out.targets.assign(batch.targets.begin() + a, batch.targets.begin() + z);
  if (!batch.is_padding.empty())
    out.is_padding.assign(batch.is_padding.begin() + a, batch.is_padding.begin() + z);
  return out;
}

void offer_example(std::vector<FeatureHit>& best, FeatureHit hit, int top) {
  auto same = std::find_if(best.begin(), best.end(), [&](const FeatureHit& b) { return b.seq == hit.seq; });
  if (same != best.end()) {
    if (hit.act > same->act) *same = hit;
  } else if (static_cast<int>(best.size()) < top) {
    best.push_back(hit);
  } else {
    auto low = std::min_element(best.begin(), best.end(),
                                [](const FeatureHit& a, const FeatureHit& b) { return a.act < b.act; });
    if (hit.act > low->act) *low = hit;
  }
}

std::string vocab_token_name(const train::Task& task, int64_t id) {
  return id < task.vocab_size() ? task.token_name(static_cast<int>(id)) : "<id " + std::to_string(id) + ">";
}

std::vector<std::string> sequence_token_names(const train::Task& task, const train::Batch& one) {
  std::vector<std::string> names;
  for (int t = 0; t < one.T; ++t) {
    if (!one.is_padding.empty() && one.is_padding[t]) break;
    names.push_back(vocab_token_name(task, one.inputs[t]));
  }
  return names;
}

void fill_feature(findings::SaeFeature& f, const float* row, int64_t V, int top_tokens,
                  std::vector<FeatureHit>& best, const train::Task& task) {
  std::vector<int64_t> order(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) order[v] = v;
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  const int64_t k = std::min<int64_t>(top_tokens, V);
  for (int64_t i = 0; i < k; ++i) f.promoted.push_back({vocab_token_name(task, order[i]), row[order[i]]});
  for (int64_t i = 0; i < k; ++i)
    f.suppressed.push_back({vocab_token_name(task, order[V - 1 - i]), row[order[V - 1 - i]]});
  std::sort(best.begin(), best.end(), [](const FeatureHit& a, const FeatureHit& b) {
    return a.act > b.act || (a.act == b.act && a.seq < b.seq);
  });
  for (const FeatureHit& b : best) {
    findings::SaeExample ex;
    ex.sequence = b.seq;
    ex.position = b.pos;
    ex.max = b.act;
    f.examples.push_back(std::move(ex));
  }
}

namespace {

// The SAE's features (N, d_sae) and reconstruction (N, d_in) of rows, without a graph.
SaeOutput<float> run_sae(const SaeParams<float>& sae, const SaeConfig& config, const std::vector<float>& rows,
                         int64_t n) {
  ag::NoGradScope no_grad;
  const ag::Tensor<float> x = ag::Tensor<float>::from({n, sae.d_in()}, rows);
  return sae_forward(sae, x, config.activation, 0.f, config.k);
}

}  // namespace

std::vector<double> log_probs(const float* logits, int64_t V) {
  std::vector<double> out(static_cast<size_t>(V));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]));
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(double(logits[v]) - mx);
  const double lse = mx + std::log(s);
  for (int64_t v = 0; v < V; ++v) out[v] = logits[v] - lse;
  return out;
}

void SplicedLoss::add(const std::vector<int32_t>& targets, const ag::Tensor<float>& clean,
                      const ag::Tensor<float>& spliced, const ag::Tensor<float>& zeroed) {
  const int64_t V = clean.size(2);
  for (int64_t i = 0; i < static_cast<int64_t>(targets.size()); ++i) {
    const int32_t tgt = targets[i];
    if (tgt < 0) continue;
    ++scored;
    const std::vector<double> lc = log_probs(clean.data() + i * V, V);
    const std::vector<double> ls = log_probs(spliced.data() + i * V, V);
    const std::vector<double> lz = log_probs(zeroed.data() + i * V, V);
    ce[0] -= lc[tgt];
    ce[1] -= ls[tgt];
    ce[2] -= lz[tgt];
    for (int64_t v = 0; v < V; ++v) kl += std::exp(lc[v]) * (lc[v] - ls[v]);
  }
}

SplicedLoss::Means SplicedLoss::means() const {
  Means m;
  if (scored == 0) return m;
  m.clean = ce[0] / scored;
  m.spliced = ce[1] / scored;
  m.zeroed = ce[2] / scored;
  m.kl = kl / scored;
  const double gap = m.zeroed - m.clean;
  m.recovered = gap != 0 ? (m.zeroed - m.spliced) / gap : 0;
  return m;
}

SaeEval evaluate_sae(const nn::CausalLM<float>& model, const train::Task& task, const SaeParams<float>& sae,
                     const SaeConfig& config, const std::string& point, const train::Batch& held_out,
                     std::vector<findings::SaeFeature>* features, int top_tokens) {
  const bool skip_bos = config.skip_bos;
  const int top_examples = config.top_examples;
  const int64_t D = sae.d_in(), M = sae.d_sae();
  SaeEval e;
  std::vector<int64_t> active(static_cast<size_t>(M), 0);
  // Per feature, its best (activation, sequence, position) per sequence, kept as the top_examples best.
  std::vector<std::vector<FeatureHit>> best(features ? static_cast<size_t>(M) : 0);
  std::vector<double> sum_x(static_cast<size_t>(D), 0.0);
  double sq_x = 0, sq_err = 0, l0 = 0;
  SplicedLoss loss;
  for (int b0 = 0; b0 < held_out.B; b0 += kChunk) {
    const train::Batch chunk = slice(held_out, b0, std::min(held_out.B, b0 + kChunk));
    const ActivationRows rows = capture_rows(model, chunk, point, skip_bos);
    const int64_t N = rows.rows();
    const SaeOutput<float> out = run_sae(sae, config, rows.data, N);
    for (int64_t r = 0; r < N; ++r) {
      const float* x = rows.data.data() + r * D;
      const float* xh = out.x_hat.data() + r * D;
      for (int64_t k = 0; k < D; ++k) {
        const double d = double(xh[k]) - x[k];
        sq_err += d * d;
        sum_x[k] += x[k];
        sq_x += double(x[k]) * x[k];
      }
      const float* f = out.f.data() + r * M;
      for (int64_t j = 0; j < M; ++j) {
        if (!(f[j] > 0)) continue;
        ++active[j];
        l0 += 1;
        if (!features) continue;
        offer_example(best[j], {f[j], b0 + rows.seq[r], rows.pos[r]}, top_examples);
      }
    }
    e.tokens += N;
    // The three forwards: clean, the SAE's reconstruction spliced in, the activation zeroed.
    ag::NoGradScope no_grad;
    const ag::Tensor<float> clean = model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, nullptr);
    ag::Tensor<float> spliced[2];
    for (int mode = 0; mode < 2; ++mode) {
      nn::Hooks<float> hooks;
      hooks.add(point, [&](const ag::Tensor<float>& v) {
        ag::Tensor<float> w = v.detach();
        for (int64_t r = 0; r < N; ++r) {
          float* dst = w.data() + (static_cast<int64_t>(rows.seq[r]) * chunk.T + rows.pos[r]) * D;
          if (mode == 0)
            std::copy(out.x_hat.data() + r * D, out.x_hat.data() + (r + 1) * D, dst);
          else
            std::fill(dst, dst + D, 0.f);
        }
        return w;
      });
      spliced[mode] = model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, &hooks);
    }
    loss.add(chunk.targets, clean, spliced[0], spliced[1]);
  }
  if (e.tokens == 0)
    throw std::invalid_argument("point " + point + ": the held-out sequences have no token to evaluate");
  const double n = static_cast<double>(e.tokens);
  double total_var = sq_x;
  for (int64_t k = 0; k < D; ++k) total_var -= sum_x[k] * sum_x[k] / n;
  e.mse = sq_err / (n * D);
  e.explained_variance = total_var > 0 ? 1 - sq_err / total_var : 0;
  e.l0 = l0 / n;
  e.density.resize(static_cast<size_t>(M));
  e.density_histogram.assign(7, 0);
  for (int64_t j = 0; j < M; ++j) {
    e.density[j] = active[j] / n;
    if (active[j] == 0) {
      ++e.dead;
      ++e.density_histogram[0];
    } else {
      const int bin = std::clamp(static_cast<int>(std::floor(std::log10(e.density[j]))) + 6, 0, 5);
      ++e.density_histogram[1 + bin];
    }
  }
  const SplicedLoss::Means m = loss.means();
  e.ce_clean = m.clean;
  e.ce_with_sae = m.spliced;
  e.ce_zero_ablation = m.zeroed;
  e.kl = m.kl;
  e.ce_loss_recovered = m.recovered;
  if (!features) return e;

  const std::vector<float> effects = decoder_logit_effects(model, sae, point);
  const int64_t V = static_cast<int64_t>(effects.size()) / M;
  features->assign(static_cast<size_t>(M), {});
  for (int64_t j = 0; j < M; ++j) {
    findings::SaeFeature& f = (*features)[j];
    f.index = j;
    f.density = e.density[j];
    fill_feature(f, effects.data() + j * V, V, top_tokens, best[j], task);
  }
  // Each example's activations at every token of its sequence: the sequences' rows through the SAE.
  std::vector<std::vector<std::pair<int64_t, int>>> by_seq(
      static_cast<size_t>(held_out.B));  // (feature, example)
  for (int64_t j = 0; j < M; ++j)
    for (int i = 0; i < static_cast<int>((*features)[j].examples.size()); ++i)
      by_seq[(*features)[j].examples[i].sequence].push_back({j, i});
  for (int s = 0; s < held_out.B; ++s) {
    if (by_seq[s].empty()) continue;
    const train::Batch one = slice(held_out, s, s + 1);
    const ActivationRows rows = capture_rows(model, one, point, skip_bos);
    const SaeOutput<float> out = run_sae(sae, config, rows.data, rows.rows());
    const std::vector<std::string> tokens = sequence_token_names(task, one);
    for (const auto& [j, i] : by_seq[s]) {
      findings::SaeExample& ex = (*features)[j].examples[i];
      ex.tokens = tokens;
      ex.acts.assign(tokens.size(), 0.f);
      for (int64_t r = 0; r < rows.rows(); ++r)
        if (rows.pos[r] < static_cast<int>(tokens.size())) ex.acts[rows.pos[r]] = out.f.data()[r * M + j];
    }
  }
  return e;
}

std::vector<float> decoder_logit_effects(const nn::CausalLM<float>& model, const SaeParams<float>& sae,
                                         const std::string& point) {
  const int64_t M = sae.d_sae(), Din = sae.d_in();
  const nn::ModelView<float> mv = nn::view(model);
  const int64_t Dm = mv.unembed.weight.size(1), V = mv.unembed.weight.size(0);
  ag::MatMap<float> W_dec(const_cast<float*>(sae.W_dec.data()), M, Din);
  Eigen::MatrixXf dirs;  // (M, Dm): the directions written into the residual stream
  const std::string suffix = ".mlp.post";
  if (point.size() > suffix.size() &&
      point.compare(point.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const int layer = std::stoi(point.substr(7));
    const ag::Tensor<float>& fc2 = mv.layers.at(static_cast<size_t>(layer)).mlp_out.writer.weight;  // (Dm, F)
    dirs = W_dec * ag::ConstMatMap<float>(fc2.data(), Dm, Din).transpose();
  } else if (Din == Dm) {
    dirs = W_dec;
  } else {
    return std::vector<float>(static_cast<size_t>(M * V), 0.f);
  }
  const ag::Tensor<float>& final_weight = mv.final_read.norm.weight;
  if (final_weight.defined()) {  // the final norm's weight folded in (the identity norm has none)
    const Eigen::VectorXf g = ag::ConstVecMap<float>(final_weight.data(), Dm);
    dirs = dirs * g.asDiagonal();
  }
  const Eigen::MatrixXf eff = dirs * ag::ConstMatMap<float>(mv.unembed.weight.data(), V, Dm).transpose();
  std::vector<float> out(static_cast<size_t>(M * V));
  ag::MatMap<float>(out.data(), M, V) = eff;
  return out;
}

std::vector<int> hungarian_max(const std::vector<double>& w, int n, int m) {
  if (n > m) throw std::invalid_argument("hungarian_max: more rows than columns");
  // Shortest augmenting paths with potentials on cost = -w (e-maxx's formulation, 1-indexed).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0), v(m + 1, 0);
  std::vector<int> p(m + 1, 0), way(m + 1, 0);
  std::vector<double> minv(m + 1);
  std::vector<char> used(m + 1);
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::fill(minv.begin(), minv.end(), inf);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[j0] = 1;
      const int i0 = p[j0];
      double delta = inf;
      int j1 = 0;
      for (int j = 1; j <= m; ++j) {
        if (used[j]) continue;
        const double cur = -w[static_cast<size_t>(i0 - 1) * m + (j - 1)] - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (int j = 0; j <= m; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const int j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0);
  }
  std::vector<int> col(n, -1);
  for (int j = 1; j <= m; ++j)
    if (p[j] > 0) col[p[j] - 1] = j - 1;
  return col;
}

double mean_max_cos(const std::vector<float>& truth, const std::vector<float>& learned, int64_t d) {
  const int64_t n = static_cast<int64_t>(truth.size()) / d, m = static_cast<int64_t>(learned.size()) / d;
  ag::ConstMatMap<float> A(truth.data(), n, d), B(learned.data(), m, d);
  const Eigen::VectorXf an = A.rowwise().norm(), bn = B.rowwise().norm();
  const Eigen::MatrixXf cos = (A * B.transpose()).array() / (an * bn.transpose()).array().max(1e-12f);
  return static_cast<double>(cos.rowwise().maxCoeff().mean());
}

double mcc(const std::vector<float>& truth, int64_t n, const std::vector<float>& learned, int64_t m,
           int64_t N) {
  auto standardize = [N](const std::vector<float>& a, int64_t k) {
    Eigen::MatrixXd z = ag::ConstMatMap<float>(a.data(), N, k).cast<double>();
    z.rowwise() -= z.colwise().mean();
    const Eigen::RowVectorXd sd = z.colwise().norm();
    for (int64_t c = 0; c < k; ++c) z.col(c) /= sd[c] > 0 ? sd[c] : 1.0;
    return z;
  };
  const Eigen::MatrixXd corr = standardize(truth, n).transpose() * standardize(learned, m);  // (n, m)
  std::vector<double> w(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) w[i * m + j] = std::abs(corr(i, j));
  const std::vector<int> col = hungarian_max(w, static_cast<int>(n), static_cast<int>(m));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += w[i * m + col[i]];
  return s / n;
}

}  // namespace dictionary
