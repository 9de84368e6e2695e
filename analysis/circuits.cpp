// Weight-based circuit analysis and direct logit attribution (see circuits.h).
#include "analysis/circuits.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/processing.h"
#include "analysis/run_study.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/model_view.h"

namespace analysis {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// A norm's weight, ones where it has none (the identity).
VectorXd norm_weight(const nn::NormView<float>& norm, int64_t d_model) {
  return norm.weight.defined() ? nn::vector_of(norm.weight, d_model) : VectorXd::Ones(d_model);
}

// W_U (D x V): the unembedding's weight^T with the final norm's weight folded in row-wise.
MatrixXd unembedding(const nn::ModelView<float>& v) {
  return norm_weight(v.final_read.norm, v.shape.d_model).asDiagonal() *
         nn::matrix_of(v.unembed.weight).transpose();
}

MatrixXd gaussian(int64_t rows, int64_t cols, ag::Rng& rng) {
  MatrixXd m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = rng.normal();
  return m;
}

void check_head(const nn::CausalLM<float>& model, int layer, int head) {
  if (layer < 0 || layer >= model.shape.n_layers || head < 0 || head >= model.shape.n_heads)
    throw std::invalid_argument("circuits: no layer " + std::to_string(layer) + " head " +
                                std::to_string(head) + " in this model");
}

}  // namespace

HeadWeights head_weights(const nn::CausalLM<float>& model, int layer, int head) {
  check_head(model, layer, head);
  const nn::BlockView<float> block = nn::view(model).layers[layer];
  const VectorXd gain = norm_weight(block.attn_in.norm, model.shape.d_model);
  const nn::HeadWeights h = block.attention.head(head);
  HeadWeights w;
  w.WQ = gain.asDiagonal() * h.W_Q;
  w.WK = gain.asDiagonal() * h.W_K;
  w.WV = gain.asDiagonal() * h.W_V;
  w.WO = h.W_O;
  return w;
}

double composition_score(const MatrixXd& M, const MatrixXd& X, const MatrixXd& Y) {
  return M.norm() / (X.norm() * Y.norm());
}

namespace {

// ||A B C||_F^2 for A (D x dk), B (dk x dk), C (dk x D) from the dk x dk Gram matrices a = A^T A and
// c = C C^T: trace(B^T a B c), so no D x D matrix is formed. Clamped at 0 against rounding.
double factored_norm2(const MatrixXd& a, const MatrixXd& b, const MatrixXd& c) {
  return std::max(0.0, (a * b * c).cwiseProduct(b).sum());
}

// ||A C||_F from the same Gram matrices: sqrt(trace(a c)) (both symmetric), clamped likewise.
double factored_norm(const MatrixXd& a, const MatrixXd& c) {
  return std::sqrt(std::max(0.0, a.cwiseProduct(c).sum()));
}

// A head's circuits as factors: OV = W_V W_O and QK = W_Q W_K^T, with the Gram matrices of their outer
// factors (W_V^T W_V, W_O W_O^T, W_Q^T W_Q, W_K^T W_K) and their norms.
struct FactoredHead {
  explicit FactoredHead(HeadWeights w)
      : h(std::move(w)),
        v(h.WV.transpose() * h.WV),
        o(h.WO * h.WO.transpose()),
        q(h.WQ.transpose() * h.WQ),
        k(h.WK.transpose() * h.WK),
        ov_norm(factored_norm(v, o)),
        qk_norm(factored_norm(q, k)) {}
  HeadWeights h;
  MatrixXd v, o, q, k;
  double ov_norm, qk_norm;
};

double ratio(double norm2, double x, double y) {
  return std::sqrt(norm2) / (x * y);
}

}  // namespace

// Each score's M is A B C with A = W_V^A, C a factor of head B's, and B dk x dk (factored_norm2):
//   Q: OV^A QK^B   = W_V^A (W_O^A W_Q^B) W_K^B^T;  K: OV^A QK^B^T = W_V^A (W_O^A W_K^B) W_Q^B^T;
//   V: OV^A OV^B   = W_V^A (W_O^A W_V^B) W_O^B.
// The same numbers as composition_score on the D x D matrices, at dk^2 D per pair instead of D^3.
std::vector<findings::CompositionScore> composition_scores(const nn::CausalLM<float>& model) {
  const int L = static_cast<int>(model.shape.n_layers), H = static_cast<int>(model.shape.n_heads);
  std::vector<FactoredHead> w;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) w.emplace_back(head_weights(model, l, h));
  std::vector<findings::CompositionScore> out;
  for (int la = 0; la < L; ++la)
    for (int ha = 0; ha < H; ++ha) {
      const FactoredHead& a = w[la * H + ha];
      for (int lb = la + 1; lb < L; ++lb)
        for (int hb = 0; hb < H; ++hb) {
          const FactoredHead& b = w[lb * H + hb];
          findings::CompositionScore c{la, ha, lb, hb, 0, 0, 0};
          c.q = ratio(factored_norm2(a.v, a.h.WO * b.h.WQ, b.k), a.ov_norm, b.qk_norm);
          c.k = ratio(factored_norm2(a.v, a.h.WO * b.h.WK, b.q), a.ov_norm, b.qk_norm);
          c.v = ratio(factored_norm2(a.v, a.h.WO * b.h.WV, b.o), a.ov_norm, b.ov_norm);
          out.push_back(c);
        }
    }
  return out;
}

findings::CompositionBaseline composition_baseline(int64_t d_model, int64_t dk, int pairs, uint64_t seed) {
  ag::Rng rng(seed);
  findings::CompositionBaseline b;
  for (int kind = 0; kind < 3; ++kind) {
    double sum = 0;
    for (int n = 0; n < pairs; ++n) {
      // X = G1 G2, Y = G3 G4; M = X Y = G1 (G2 G3) G4, or X Y^T = G1 (G2 G4^T) G3^T for K, as factors.
      // Each pair's second factor is drawn first, as the seeded baseline always has been.
      const MatrixXd g2 = gaussian(dk, d_model, rng), g1 = gaussian(d_model, dk, rng);
      const MatrixXd g4 = gaussian(dk, d_model, rng), g3 = gaussian(d_model, dk, rng);
      const MatrixXd a = g1.transpose() * g1, x_c = g2 * g2.transpose();
      const MatrixXd y_a = g3.transpose() * g3, y_c = g4 * g4.transpose();
      const double x = factored_norm(a, x_c), y = factored_norm(y_a, y_c);
      const double m2 =
          kind == 1 ? factored_norm2(a, g2 * g4.transpose(), y_a) : factored_norm2(a, g2 * g3, y_c);
      sum += ratio(m2, x, y);
    }
    (kind == 0 ? b.q : kind == 1 ? b.k : b.v) = sum / pairs;
  }
  return b;
}

namespace {

// The copying score of W_E OV^h W_U (V x V) from the dk x dk matrix with its nonzero eigenvalues: with
// OV^h = W_V W_O, that product is X Y with X = W_E W_V (V x dk) and Y = W_O W_U (dk x V), and X Y has the
// nonzero eigenvalues of Y X = W_O (W_U W_E) W_V; its other V - dk eigenvalues are zero and add nothing to
// either sum. So the cost is one D x V x D product per model (ue = W_U W_E, shared by every head), not a
// V x V eigendecomposition per head, and any vocabulary is read.
double copying_score_of(const nn::CausalLM<float>& model, const MatrixXd& ue, int layer, int head) {
  const HeadWeights w = head_weights(model, layer, head);
  const MatrixXd small = w.WO * ue * w.WV;
  const Eigen::VectorXcd eig = Eigen::EigenSolver<MatrixXd>(small, false).eigenvalues();
  double re = 0, abs = 0;
  for (Eigen::Index i = 0; i < eig.size(); ++i) re += eig(i).real(), abs += std::abs(eig(i));
  return abs > 0 ? re / abs : 0.0;
}

}  // namespace

double copying_score(const nn::CausalLM<float>& model, int layer, int head) {
  const nn::ModelView<float> v = nn::view(model);
  return copying_score_of(model, unembedding(v) * nn::matrix_of(v.token_embedding), layer, head);
}

std::vector<std::vector<double>> positional_qk(const nn::CausalLM<float>& model, int head, int positions) {
  check_head(model, 0, head);
  if (positions < 1 || positions > model.shape.max_len)
    throw std::invalid_argument("positional_qk: " + std::to_string(positions) +
                                " positions, the model has 1.." + std::to_string(model.shape.max_len));
  const nn::ModelView<float> v = nn::view(model);
  const nn::BlockView<float>& block = v.layers[0];
  const nn::AttentionView<float>& attn = block.attention;
  const int64_t dk = attn.dk, D = model.shape.d_model;
  if (model.shape.positions == nn::PositionKind::none)
    throw std::invalid_argument("positional_qk: model.positions none: the model has no positions to read");
  // Learned: the positions' embeddings. Rotary: the mean token embedding at every position (the positions
  // enter below, as the rotation of q and k).
  const MatrixXd P =
      v.position_embedding.defined()
          ? nn::matrix_of(v.position_embedding).topRows(positions).eval()
          : MatrixXd(MatrixXd::Ones(positions, 1) * nn::matrix_of(v.token_embedding).colwise().mean());
  MatrixXd X = P;  // the attention's norm of P; P itself with the identity norm
  const nn::NormView<float>& norm = block.attn_in.norm;
  if (norm.normalises) {
    const VectorXd g = norm_weight(norm, D);
    const VectorXd beta = nn::vector_of(norm.bias, D);
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      const double mean = norm.centres ? P.row(i).mean() : 0.0;
      const double var = (P.row(i).array() - mean).square().mean();
      const VectorXd centred = P.row(i).transpose().array() - mean;
      X.row(i) =
          (centred.array() / std::sqrt(var + norm.eps) * g.array() + beta.array()).matrix().transpose();
    }
  }
  const nn::HeadWeights h = attn.head(head);
  MatrixXd q = (X * h.W_Q).rowwise() + h.b_Q.transpose();
  MatrixXd k = (X * h.W_K).rowwise() + h.b_K.transpose();
  // QK-norm: each row RMS-normalised with the head's q_norm (k_norm) weight, as the model does.
  auto qk_normed = [&](MatrixXd& m, const ag::Tensor<float>& weight) {
    if (!weight.defined()) return;
    const VectorXd w = nn::vector_of(weight, dk);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      m.row(i) = (m.row(i).array() / std::sqrt(m.row(i).squaredNorm() / double(dk) + attn.norm_eps) *
                  w.transpose().array())
                     .matrix();
  };
  qk_normed(q, attn.query_norm);
  qk_normed(k, attn.key_norm);
  if (attn.rotary_dims) {  // row i turned by position i, as the model turns them (ag::rotary)
    auto turn = [&](MatrixXd& m) {
      std::vector<double> rows(static_cast<size_t>(positions * dk));
      for (int i = 0; i < positions; ++i)
        for (int64_t j = 0; j < dk; ++j) rows[i * dk + j] = m(i, j);
      const std::vector<double> turned = ag::rotary(ag::Tensor<double>::from({1, positions, dk}, rows), dk,
                                                    attn.rotary_dims, attn.rotary_base)
                                             .to_vector();
      for (int i = 0; i < positions; ++i)
        for (int64_t j = 0; j < dk; ++j) m(i, j) = turned[i * dk + j];
    };
    turn(q);
    turn(k);
  }
  const double scale = attn.score_scale;
  const MatrixXd scores = q * k.transpose() * scale;
  std::vector<std::vector<double>> w(positions, std::vector<double>(positions, 0.0));
  for (int i = 0; i < positions; ++i) {
    // Causal, and with a local layer 0 only the keys (i - window, i].
    const int first = attn.window > 0 ? std::max<int>(0, i - static_cast<int>(attn.window) + 1) : 0;
    double top = scores(i, first);
    for (int j = first + 1; j <= i; ++j) top = std::max(top, scores(i, j));
    double sum = 0;
    for (int j = first; j <= i; ++j) sum += w[i][j] = std::exp(scores(i, j) - top);
    for (int j = first; j <= i; ++j) w[i][j] /= sum;
  }
  return w;
}

double previous_token_mass(const std::vector<std::vector<double>>& w) {
  if (w.size() < 2) return NAN;
  double sum = 0;
  for (size_t i = 1; i < w.size(); ++i) sum += w[i][i - 1];
  return sum / static_cast<double>(w.size() - 1);
}

namespace {
constexpr int64_t kDlaChunkBytes = int64_t(256) << 20;
}  // namespace

DirectLogitAttribution direct_logit_attribution(const nn::CausalLM<float>& model, const train::Batch& batch,
                                                int chunk) {
  ag::NoGradScope no_grad;
  const nn::ModelView<float> v = nn::view(model);
  const int L = static_cast<int>(v.layers.size()), H = static_cast<int>(model.shape.n_heads);
  const int64_t D = model.shape.d_model, dk = D / H, T = batch.T;
  const MatrixXd WU = unembedding(v);
  const VectorXd mean_u = WU.rowwise().mean();
  std::vector<MatrixXd> WO;  // per layer: the output map (D x D), so head h's output is z_h . wo[:, h*dk..]^T
  for (int l = 0; l < L; ++l) WO.push_back(nn::matrix_of(v.layers[l].attention.output.weight));
  const bool mlp = v.layers.front().has_mlp;
  nn::Hooks<float> hooks;
  hooks.capture(nn::hook_name(nn::Point::resid_pre, 0));
  hooks.capture(nn::hook_name(nn::Point::resid_post, L - 1));
  for (int l = 0; l < L; ++l) {
    hooks.capture(nn::hook_name(nn::Point::attn_z, l));
    if (mlp) hooks.capture(nn::hook_name(nn::Point::mlp_out, l));
  }
  DirectLogitAttribution out;
  out.heads.assign(static_cast<size_t>(L * H), 0.0);
  if (mlp) out.mlps.assign(L, 0.0);
  int64_t scored = 0;
  const nn::NormView<float>& final_norm = v.final_read.norm;
  auto row = [D](const ag::Tensor<float>& t, int64_t r) {
    return Eigen::Map<const Eigen::VectorXf>(t.data() + r * D, D).cast<double>().eval();
  };
  // The hooked forward keeps every intermediate of its sequences (the logits, each layer's attention
  // pattern, T x T a head): at most as many sequences at once as fit kDlaChunkBytes, one at the least.
  const int64_t per_sequence =
      T * (model.shape.vocab + L * (H * T + 16 * std::max<int64_t>(D, model.shape.d_ff))) * 4;
  chunk = static_cast<int>(
      std::clamp<int64_t>(kDlaChunkBytes / std::max<int64_t>(1, per_sequence), 1, std::max(1, chunk)));
  for (int start = 0; start < batch.B; start += chunk) {
    const int b = std::min(chunk, batch.B - start);
    const auto begin = batch.inputs.begin() + static_cast<int64_t>(start) * T;
    model.forward(std::vector<int32_t>(begin, begin + static_cast<int64_t>(b) * T), b, T, {}, &hooks);
    const ag::Tensor<float>& final_resid = hooks.captured(nn::hook_name(nn::Point::resid_post, L - 1));
    const ag::Tensor<float>& embed = hooks.captured(nn::hook_name(nn::Point::resid_pre, 0));
    for (int64_t r = 0; r < static_cast<int64_t>(b) * T; ++r) {
      const int32_t target = batch.targets[static_cast<size_t>(start) * T + r];
      if (target < 0) continue;
      ++scored;
      VectorXd g = WU.col(target) - mean_u;
      if (final_norm.normalises) {
        const VectorXd x = row(final_resid, r);
        const double mean = final_norm.centres ? x.mean() : 0.0;
        const double sigma = std::sqrt((x.array() - mean).square().mean() + final_norm.eps);
        // Centring c before the dot equals dotting c with the centred direction.
        if (final_norm.centres) g = (g.array() - g.mean()).matrix();
        g /= sigma;
      }
      out.embed += row(embed, r).dot(g);
      for (int l = 0; l < L; ++l) {
        const ag::Tensor<float>& z = hooks.captured(nn::hook_name(nn::Point::attn_z, l));  // (b, T, H, dk)
        const VectorXd zr = row(z, r);                                                     // (H * dk) = D
        const VectorXd back = WO[l].transpose() * g;  // (D): per-head slices
        for (int h = 0; h < H; ++h)
          out.heads[l * H + h] += zr.segment(h * dk, dk).dot(back.segment(h * dk, dk));
        if (mlp) out.mlps[l] += row(hooks.captured(nn::hook_name(nn::Point::mlp_out, l)), r).dot(g);
      }
    }
  }
  if (scored == 0) throw std::invalid_argument("direct_logit_attribution: the batch has no scored positions");
  for (double& v : out.heads) v /= static_cast<double>(scored);
  for (double& v : out.mlps) v /= static_cast<double>(scored);
  out.embed /= static_cast<double>(scored);
  return out;
}

findings::CircuitsResult analyse_circuits(const nn::CausalLM<float>& model, const train::Batch& held_out,
                                          int positions, bool with_composition) {
  const int L = static_cast<int>(model.shape.n_layers), H = static_cast<int>(model.shape.n_heads);
  if (with_composition && L < 2)
    throw std::invalid_argument("composition needs a model with at least 2 layers; this one has " +
                                std::to_string(L));
  findings::CircuitsResult r;
  if (with_composition) {
    r.composition = composition_scores(model);
    r.baseline = composition_baseline(model.shape.d_model, model.shape.d_model / H);
  }
  const DirectLogitAttribution dla = direct_logit_attribution(model, held_out);
  const nn::ModelView<float> v = nn::view(model);
  const MatrixXd ue = unembedding(v) * nn::matrix_of(v.token_embedding);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      findings::HeadCircuit c;
      c.layer = l;
      c.head = h;
      c.copying = copying_score_of(model, ue, l, h);
      if (l == 0 && model.shape.positions != nn::PositionKind::none) {  // NoPE has no positional reading
        findings::PositionalMap m{h, positional_qk(model, h, positions)};
        c.prev_token_positional = previous_token_mass(m.weights);
        r.positional.push_back(std::move(m));
      }
      c.dla = dla.heads[l * H + h];
      r.heads.push_back(c);
    }
  r.components.push_back({"embed", dla.embed});
  for (size_t l = 0; l < dla.mlps.size(); ++l)
    r.components.push_back({nn::block_prefix(l) + "mlp", dla.mlps[l]});
  return r;
}

Output<findings::CircuitsResult> circuits(StudyRun& run, const CircuitsRequest& request) {
  if (request.processed && request.save)
    throw RequestError("save: the processed weights are printed only (processed true needs save false)");
  const int L = static_cast<int>(run.model->shape.n_layers);
  if (request.composition && L < 2)
    throw RequestError("composition: needs a model with at least 2 layers, this one has " +
                       std::to_string(L) + " (composition false gives the per-head numbers)");
  Output<findings::CircuitsResult> out;
  if (request.processed) {  // the processed copy: the run's files stay those of its own weights
    const auto model = processed_weights(*run.model);
    out.result = run_circuits(*model, *run.task, run.config, run.step, request.composition);
  } else if (request.save) {
    const io::RunLock lock(run.dir);  // one writer per run folder
    out.result =
        write_circuits_files(*run.model, *run.task, run.config, run.dir, run.step, request.composition);
    out.wrote = {io::layout::circuits_json(run.dir), io::layout::circuits_dir(run.dir) + "/*.svg",
                 io::layout::report_html(run.dir)};
  } else {
    out.result = run_circuits(*run.model, *run.task, run.config, run.step, request.composition);
  }
  return out;
}

}  // namespace analysis
