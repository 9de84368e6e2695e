// The Fourier analysis of a modular-addition model (see fourier.h).
#include "analysis/fourier.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/run_study.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/hook_points.h"
#include "nn/model_view.h"

namespace analysis {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using RowMatrixXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kPi = 3.14159265358979323846;

// The orthonormal Fourier basis of Z_p (p x p): row 0 constant, rows 2k-1, 2k cos and sin of frequency k.
MatrixXd fourier_basis(int p) {
  MatrixXd F(p, p);
  for (int x = 0; x < p; ++x) F(0, x) = 1.0;
  for (int k = 1; 2 * k < p; ++k)
    for (int x = 0; x < p; ++x) {
      F(2 * k - 1, x) = std::cos(2 * kPi * k * x / p);
      F(2 * k, x) = std::sin(2 * kPi * k * x / p);
    }
  for (int r = 0; r < p; ++r) F.row(r).normalize();
  return F;
}

// The rows of a (rows, cols) float tensor, picked by id, as doubles.
MatrixXd rows_of(const ag::Tensor<float>& t, const std::vector<int32_t>& ids) {
  const int64_t cols = t.size(1);
  MatrixXd m(static_cast<Eigen::Index>(ids.size()), cols);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < cols; ++c) m(static_cast<Eigen::Index>(i), c) = t.data()[ids[i] * cols + c];
  return m;
}

// Per frequency k = 1..(p-1)/2: the norm of X's component in cos_k and sin_k over its rows (X is p x n,
// rows indexed by the value).
std::vector<double> spectrum(const MatrixXd& F, const MatrixXd& X) {
  const MatrixXd C = F * X;
  std::vector<double> norms;
  for (int k = 1; 2 * k < F.rows(); ++k)
    norms.push_back(std::sqrt(C.row(2 * k - 1).squaredNorm() + C.row(2 * k).squaredNorm()));
  return norms;
}

// Mean cross-entropy and accuracy of rows of logits (n x classes) against targets, over the rows `use`
// selects.
struct LossAcc {
  double loss = 0, acc = 0;
};
LossAcc cross_entropy(const RowMatrixXd& logits, const std::vector<int>& targets,
                      const std::vector<uint8_t>& use) {
  double loss = 0, correct = 0, n = 0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (!use[r]) continue;
    const double top = logits.row(r).maxCoeff();
    const double lse = top + std::log((logits.row(r).array() - top).exp().sum());
    loss += lse - logits(r, targets[r]);
    Eigen::Index best = 0;
    logits.row(r).maxCoeff(&best);
    correct += best == targets[r];
    n += 1;
  }
  if (n == 0) return {};
  return {loss / n, correct / n};
}

}  // namespace

ModularAddition modular_addition(const train::Task& task) {
  const train::TaskConfig& c = task.config();
  const bool bare = c.kind == "modadd_bare";
  if ((c.kind != "modadd" && !bare) || c.length != 2)
    throw std::invalid_argument(
        "fourier: the run's task is " + c.kind + " with length " + std::to_string(c.length) +
        "; fourier reads modular addition: task.kind modadd or modadd_bare with length 2");
  if (c.vocab % 2 == 0)
    throw std::invalid_argument("fourier: the modulus p (task.vocab) is " + std::to_string(c.vocab) +
                                "; the Fourier analysis needs an odd p");
  ModularAddition d;
  d.p = c.vocab;
  d.T = task.seq_len();
  d.answer_position = bare ? 2 : 4;
  auto id = [&](const std::string& name) { return static_cast<int32_t>(*task.token_id(name)); };
  for (int v = 0; v < d.p; ++v) d.value_ids.push_back(id(std::to_string(v)));
  const int a_pos = bare ? 0 : 1, b_pos = bare ? 1 : 3;
  const size_t pairs = static_cast<size_t>(d.p) * d.p;
  d.inputs.reserve(pairs * d.T);
  d.held_out.assign(pairs, 0);
  for (int a = 0; a < d.p; ++a)
    for (int b = 0; b < d.p; ++b) {
      std::vector<int32_t> row =
          bare ? std::vector<int32_t>{d.value_ids[a], d.value_ids[b], id("=")}
               : std::vector<int32_t>{id("BOS"), d.value_ids[a], id("+"), d.value_ids[b], id("=")};
      d.inputs.insert(d.inputs.end(), row.begin(), row.end());
      if (!task.finite()) {
        row.push_back(d.value_ids[(a + b) % d.p]);
        d.held_out[static_cast<size_t>(a) * d.p + b] = task.is_held_out(row);
      }
    }
  if (task.finite()) {
    const train::Batch held = task.split_set(true, task.split_size(true));
    for (int r = 0; r < held.B; ++r) {
      const int a = held.inputs[static_cast<size_t>(r) * held.T + a_pos] - d.value_ids[0];
      const int b = held.inputs[static_cast<size_t>(r) * held.T + b_pos] - d.value_ids[0];
      d.held_out[static_cast<size_t>(a) * d.p + b] = 1;
    }
  }
  return d;
}

double gini(std::vector<double> c) {
  std::sort(c.begin(), c.end());
  double l1 = 0;
  for (double x : c) l1 += x;
  if (c.empty() || l1 <= 0) return 0;
  const double n = static_cast<double>(c.size());
  double s = 0;
  for (size_t i = 0; i < c.size(); ++i) s += c[i] / l1 * (n - static_cast<double>(i + 1) + 0.5) / n;
  return 1 - 2 * s;
}

findings::FourierReport fourier_analysis(const nn::CausalLM<float>& model, const ModularAddition& d,
                                         int64_t step) {
  const nn::ModelView<float> mv = nn::view(model);
  const nn::BlockView<float>& block = mv.layers.back();
  if (!block.has_mlp) throw std::invalid_argument("fourier: the model has no MLP (model.attention_only)");
  if (d.T > model.shape.max_len || model.shape.vocab <= d.value_ids.back())
    throw std::invalid_argument("fourier: the model's max_len or vocab does not fit the task");
  const int p = d.p, K = (p - 1) / 2;
  const int64_t pairs = static_cast<int64_t>(p) * p, V = model.shape.vocab, n_neurons = model.shape.d_ff;
  const std::string post = nn::hook_name(nn::Point::mlp_post, static_cast<size_t>(model.shape.n_layers) - 1);

  // Every pair's MLP activations and logits at the answer position, a chunk of pairs at a time.
  // acts stays float (p^2 x d_mlp, 26 MB at p 113): it is written once per measured step, and its
  // products below sum p terms, far inside the analysis' 1e-4.
  RowMatrixXf acts(pairs, n_neurons);
  RowMatrixXd logits(pairs, V);
  {
    ag::NoGradScope no_grad;
    const int64_t chunk = 1024;
    for (int64_t start = 0; start < pairs; start += chunk) {
      const int64_t b = std::min(chunk, pairs - start);
      nn::Hooks<float> hooks;
      hooks.capture(post);
      const std::vector<int32_t> ids(d.inputs.begin() + start * d.T, d.inputs.begin() + (start + b) * d.T);
      const ag::Tensor<float> out = model.forward(ids, b, d.T, {}, &hooks);
      const float* act = hooks.captured(post).data();
      for (int64_t r = 0; r < b; ++r) {
        const int64_t at = r * d.T + d.answer_position;
        for (int64_t n = 0; n < n_neurons; ++n) acts(start + r, n) = act[at * n_neurons + n];
        for (int64_t v = 0; v < V; ++v) logits(start + r, v) = out.data()[at * V + v];
      }
    }
  }
  std::vector<int> answer_ids(pairs), classes(pairs);
  std::vector<uint8_t> train(pairs), test(pairs);
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b) {
      const int64_t r = static_cast<int64_t>(a) * p + b;
      classes[r] = (a + b) % p;
      answer_ids[r] = d.value_ids[classes[r]];
      test[r] = d.held_out[r];
      train[r] = !d.held_out[r];
    }

  findings::FourierReport out;
  out.p = p;
  findings::FourierMeasures& m = out.measures;
  m.step = step;
  const LossAcc tr = cross_entropy(logits, answer_ids, train), te = cross_entropy(logits, answer_ids, test);
  m.train_loss = tr.loss, m.train_acc = tr.acc, m.test_loss = te.loss, m.test_acc = te.acc;

  // The spectra.
  const MatrixXd F = fourier_basis(p);
  const MatrixXd WE = rows_of(mv.token_embedding, d.value_ids);  // (p, D)
  const MatrixXd WU = rows_of(mv.unembed.weight, d.value_ids);   // (p, D): W_U^T on the value classes
  const ag::Tensor<float>& fc2 = block.mlp_out.writer.weight;    // (D, F_)
  const MatrixXd Wout =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          fc2.data(), fc2.size(0), fc2.size(1))
          .cast<double>();
  out.embed_norms = spectrum(F, WE);
  out.unembed_norms = spectrum(F, WU);
  out.neuron_logit_norms = spectrum(F, WU * Wout);  // W_L = W_U W_out, (p classes, F_)

  // Neurons: the 2D transform G = F A F^T of each neuron's (a, b) grid A; frequency k explains the terms
  // whose two frequencies are in {0, k}, but the constant. F is orthonormal, so ||G|| = ||A||, and only G's
  // first row and column and its 2 x 2 diagonal blocks are needed. acts, row-major (p^2, N), is the (p, p N)
  // matrix [a][b N + n], so one product gives B = F A for every neuron: B(k, b N + n).
  out.neuron_explained.assign(n_neurons, std::vector<double>(K, 0.0));
  {
    const int64_t N = n_neurons;
    const RowMatrixXf Bf =
        F.cast<float>() * Eigen::Map<const RowMatrixXf>(acts.data(), p, p * N);  // (p, p N)
    // Row k of B as the (p, N) matrix [b][n], in double for the sums below.
    auto Bk = [&](int k) {
      return Eigen::Map<const RowMatrixXf>(Bf.data() + static_cast<int64_t>(k) * p * N, p, N).cast<double>();
    };
    const RowMatrixXd row0 = F * Bk(0);  // G_n(0, l) at [l][n]
    RowMatrixXd col0(p, N);              // G_n(k, 0) at [k][n]
    for (int k = 0; k < p; ++k) col0.row(k) = F.row(0) * Bk(k);
    VectorXd total = VectorXd::Zero(N);  // ||A_n||^2 - G_n(0, 0)^2, summed by rows (acts is row-major)
    for (int64_t r = 0; r < pairs; ++r) total += acts.row(r).transpose().cast<double>().cwiseAbs2();
    total -= row0.row(0).transpose().cwiseAbs2();
    std::vector<double> best(static_cast<size_t>(N), -1.0);
    std::vector<int> best_k(static_cast<size_t>(N), 0);
    for (int k = 1; k <= K; ++k) {
      const int c = 2 * k - 1;
      // The 2 x 2 block G_n(c + i, c + j) = sum_b B(c + i, b N + n) F(c + j, b), at [i * 2 + j][n].
      RowMatrixXd block(4, N);
      for (int i = 0; i < 2; ++i) block.middleRows(2 * i, 2) = F.middleRows(c, 2) * Bk(c + i);
      for (int64_t n = 0; n < N; ++n) {
        const double e = row0(c, n) * row0(c, n) + row0(c + 1, n) * row0(c + 1, n) + col0(c, n) * col0(c, n) +
                         col0(c + 1, n) * col0(c + 1, n) + block.col(n).squaredNorm();
        const double explained = total(n) > 0 ? e / total(n) : 0.0;
        out.neuron_explained[n][k - 1] = explained;
        if (explained > best[n]) {  // the first k on a tie, as the loop order gives
          best[n] = explained;
          best_k[n] = k;
        }
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      findings::FourierNeuron neuron;
      neuron.index = static_cast<int>(n);
      neuron.frequency = best_k[n];
      neuron.explained = std::max(0.0, best[n]);
      out.neurons.push_back(neuron);
    }
  }
  const int64_t cluster = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(kKeyClusterShare * n_neurons)));
  std::vector<int64_t> count(K + 1, 0);
  for (const findings::FourierNeuron& n : out.neurons)
    if (n.explained >= findings::kNeuronExplained) ++count[n.frequency];
  for (int k = 1; k <= K; ++k)
    if (count[k] >= cluster) m.key_frequencies.push_back(k);

  // Restricted and excluded logits over the value classes: the projections of each class's logits on
  // u_k(a, b) = cos(2 pi k (a + b) / p) and v_k = sin(...) of the key frequencies.
  RowMatrixXd L(pairs, p);
  for (int c = 0; c < p; ++c) L.col(c) = logits.col(d.value_ids[c]);
  RowMatrixXd projections = RowMatrixXd::Zero(pairs, p);
  for (int k : m.key_frequencies)
    for (int trig = 0; trig < 2; ++trig) {
      VectorXd u(pairs);
      for (int64_t r = 0; r < pairs; ++r) {
        const double angle = 2 * kPi * k * classes[r] / p;
        u(r) = trig == 0 ? std::cos(angle) : std::sin(angle);
      }
      projections += u * ((u.transpose() * L) / u.squaredNorm());
    }
  const RowMatrixXd restricted = projections.rowwise() + L.colwise().mean();
  const RowMatrixXd excluded = L - projections;
  m.restricted_loss = cross_entropy(restricted, classes, test).loss;
  m.excluded_loss = cross_entropy(excluded, classes, train).loss;

  m.gini_embed = gini(out.embed_norms);
  m.gini_neuron_logit = gini(out.neuron_logit_norms);
  for (const auto& param : model.named_parameters()) {
    const ag::Tensor<float>& t = *param.tensor;
    for (int64_t i = 0; i < t.numel(); ++i) m.weight_norm_sq += double(t.data()[i]) * double(t.data()[i]);
  }

  out.logit_class = 0;
  out.class_logits.assign(p, std::vector<double>(p));
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b) out.class_logits[a][b] = L(static_cast<int64_t>(a) * p + b, out.logit_class);
  return out;
}

Output<findings::FourierReport> fourier(StudyRun& run, const FourierRequest& request) {
  ModularAddition data;
  try {
    data = modular_addition(*run.task);
    if (run.config.model.attention_only) throw std::invalid_argument("fourier: the model has no MLP");
  } catch (const std::invalid_argument& e) {
    throw RequestError(run.dir + ": " + e.what());
  }
  Output<findings::FourierReport> out;
  if (request.save) {
    const io::RunLock lock(run.dir);  // one writer per run folder
    out.result = write_fourier_files(*run.model, *run.task, run.config, run.dir, run.step);
    out.wrote = {io::layout::fourier_json(run.dir), io::layout::fourier_dir(run.dir) + "/*.svg",
                 io::layout::report_html(run.dir)};
  } else {
    out.result = fourier_analysis(*run.model, data, run.step);
  }
  return out;
}

}  // namespace analysis
