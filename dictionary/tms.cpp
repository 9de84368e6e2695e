#include "dictionary/tms.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "train/optimizer.h"

namespace dictionary {

namespace {

// A batch of inputs (B, n) from `rng`.
ag::Tensor<float> tms_batch(const TmsConfig& c, int64_t rows, ag::Rng& rng) {
  ag::Tensor<float> x = ag::Tensor<float>::empty({rows, c.n});
  for (int64_t i = 0; i < rows * c.n; ++i)
    x.data()[i] = rng.uniform() < c.sparsity ? 0.f : static_cast<float>(rng.uniform());
  return x;
}

// The importance-weighted squared error, summed over features and averaged over the batch.
ag::Tensor<float> tms_loss(const ag::Tensor<float>& W, const ag::Tensor<float>& b,
                           const ag::Tensor<float>& importance, const ag::Tensor<float>& x) {
  const ag::Tensor<float> h = ag::matmul(x, ag::transpose(W));   // (B, m)
  const ag::Tensor<float> out = ag::relu(ag::matmul(h, W) + b);  // (B, n)
  const ag::Tensor<float> d = out - x;
  return ag::scale(ag::sum(importance * d * d), 1.f / static_cast<float>(x.size(0)));
}

}  // namespace

TmsResult train_tms(const TmsConfig& c) {
  ag::Rng rng(c.seed);
  // Xavier normal, as the paper's colab.
  const double std = std::sqrt(2.0 / (c.m + c.n));
  ag::Tensor<float> W = ag::Tensor<float>::empty({c.m, c.n});
  for (int64_t i = 0; i < W.numel(); ++i) W.data()[i] = static_cast<float>(rng.normal(0, std));
  ag::Tensor<float> b = ag::Tensor<float>::zeros({c.n});
  W.set_requires_grad(true);
  b.set_requires_grad(true);
  std::vector<float> imp(static_cast<size_t>(c.n));
  for (int i = 0; i < c.n; ++i) imp[i] = static_cast<float>(std::pow(c.importance, i));
  const ag::Tensor<float> importance = ag::Tensor<float>::from({c.n}, imp);
  train::AdamW opt({{"W", &W, false}, {"b", &b, false}}, 0.0);
  for (int step = 0; step < c.steps; ++step) {
    W.zero_grad();
    b.zero_grad();
    tms_loss(W, b, importance, tms_batch(c, c.batch_size, rng)).backward();
    opt.step(c.lr);
  }
  TmsResult r;
  r.W = W.to_vector();
  r.b = b.to_vector();
  ag::NoGradScope no_grad;
  ag::Rng eval_rng(c.seed ^ 0xE7A1E7A1E7A1ull);
  r.loss = tms_loss(W, b, importance, tms_batch(c, 8192, eval_rng)).item();
  return r;
}

std::vector<double> tms_norms(const TmsResult& r, int m, int n) {
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < m; ++k) out[i] += double(r.W[k * n + i]) * r.W[k * n + i];
    out[i] = std::sqrt(out[i]);
  }
  return out;
}

std::vector<double> tms_superposition(const TmsResult& r, int m, int n) {
  const std::vector<double> norm = tms_norms(r, m, n);
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int i = 0; i < n; ++i) {
    if (norm[i] == 0) continue;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      double dot = 0;
      for (int k = 0; k < m; ++k) dot += double(r.W[k * n + i]) * r.W[k * n + j];
      dot /= norm[i];
      out[i] += dot * dot;
    }
  }
  return out;
}

const std::vector<double>& tms_sweep_sparsities() {
  static const std::vector<double> s = {0.0, 0.7, 0.9, 0.97, 0.99, 0.997};
  return s;
}

analysis::Output<findings::TmsReport> tms(const TmsRequest& request) {
  if (request.m >= request.n)
    throw analysis::RequestError("m " + std::to_string(request.m) + ": expected fewer dimensions than n (" +
                                 std::to_string(request.n) + ")");
  analysis::Output<findings::TmsReport> out;
  findings::TmsReport& r = out.result;
  r.n = request.n;
  r.m = request.m;
  r.importance = request.importance;
  const std::vector<double> sparsities =
      request.sweep ? tms_sweep_sparsities() : std::vector<double>{request.sparsity};
  for (const double s : sparsities) {
    TmsConfig c;
    c.n = request.n;
    c.m = request.m;
    c.sparsity = s;
    c.importance = request.importance;
    c.steps = request.steps;
    c.seed = request.seed;
    const TmsResult t = train_tms(c);
    r.panels.push_back(
        {s, c.m, c.n, t.W, t.b, t.loss, tms_norms(t, c.m, c.n), tms_superposition(t, c.m, c.n)});
  }
  if (request.sweep) {
    const std::string figure = request.figure.empty() ? io::layout::tms_figure(r.n, r.m) : request.figure;
    io::write_text_file_atomically(figure, findings::svg_tms(findings::tms_title(r), r.panels));
    out.wrote.push_back(figure);
  }
  return out;
}

}  // namespace dictionary
