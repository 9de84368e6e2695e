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

namespace analysis {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// A 2-D float tensor (rows, cols) as a double matrix.
MatrixXd to_matrix(const ag::Tensor<float>& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  MatrixXd m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = t.data()[i * cols + j];
  return m;
}

VectorXd to_vector(const ag::Tensor<float>& t) {
  VectorXd v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v(i) = t.data()[i];
  return v;
}

// A norm's weight, ones where it has none (the identity).
VectorXd ln_weight(const nn::Norm<float>& norm, int64_t d_model) {
  return norm.weight.defined() ? to_vector(norm.weight) : VectorXd::Ones(d_model);
}

// W_U (D x V): lm_head.weight^T with ln_f.weight folded in row-wise.
MatrixXd unembedding(const nn::CausalLM<float>& model) {
  return ln_weight(*model.ln_f, model.shape.d_model).asDiagonal() *
         to_matrix(model.lm_head.weight).transpose();
}

MatrixXd gaussian(int64_t rows, int64_t cols, ag::Rng& rng) {
  MatrixXd m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = rng.normal();
  return m;
}

void check_head(const nn::CausalLM<float>& model, int layer, int head) {
  if (layer < 0 || layer >= static_cast<int>(model.blocks.size()) || head < 0 || head >= model.shape.n_heads)
    throw std::invalid_argument("circuits: no layer " + std::to_string(layer) + " head " +
                                std::to_string(head) + " in this model");
}

}  // namespace

HeadWeights head_weights(const nn::CausalLM<float>& model, int layer, int head) {
  check_head(model, layer, head);
  const auto& block = *model.blocks[layer];
  const int64_t dk = block.attn.dk;
  const VectorXd ln1 = ln_weight(*block.ln1, model.shape.d_model);
  // Grouped-query attention: the query head reads kv head head / (n_heads / n_kv_heads).
  const int64_t kv = head / (block.attn.n_heads / block.attn.n_kv_heads);
  HeadWeights w;
  w.WQ = ln1.asDiagonal() * to_matrix(block.attn.wq.weight).middleRows(head * dk, dk).transpose();
  w.WK = ln1.asDiagonal() * to_matrix(block.attn.wk.weight).middleRows(kv * dk, dk).transpose();
  w.WV = ln1.asDiagonal() * to_matrix(block.attn.wv.weight).middleRows(kv * dk, dk).transpose();
  w.WO = to_matrix(block.attn.wo.weight).middleCols(head * dk, dk).transpose();
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
  const int L = static_cast<int>(model.blocks.size()), H = static_cast<int>(model.shape.n_heads);
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
  return copying_score_of(model, unembedding(model) * to_matrix(model.tok_emb.weight), layer, head);
}

std::vector<std::vector<double>> positional_qk(const nn::CausalLM<float>& model, int head, int positions) {
  check_head(model, 0, head);
  if (positions < 1 || positions > model.shape.max_len)
    throw std::invalid_argument("positional_qk: " + std::to_string(positions) +
                                " positions, the model has 1.." + std::to_string(model.shape.max_len));
  const auto& block = *model.blocks[0];
  const int64_t dk = block.attn.dk;
  if (model.shape.positions == nn::PositionKind::none)
    throw std::invalid_argument("positional_qk: model.positions none: the model has no positions to read");
  // Learned: the positions' embeddings. Rotary: the mean token embedding at every position (the positions
  // enter below, as the rotation of q and k).
  const MatrixXd P =
      model.pos_emb
          ? to_matrix(model.pos_emb->weight).topRows(positions).eval()
          : MatrixXd(MatrixXd::Ones(positions, 1) * to_matrix(model.tok_emb.weight).colwise().mean());
  MatrixXd X = P;  // ln1(P); P itself with the identity norm
  const nn::Norm<float>& ln1 = *block.ln1;
  if (ln1.normalises()) {
    const VectorXd g = ln_weight(ln1, model.shape.d_model);
    const VectorXd beta = ln1.bias.defined() ? to_vector(ln1.bias) : VectorXd::Zero(model.shape.d_model);
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      const double mean = ln1.centres() ? P.row(i).mean() : 0.0;
      const double var = (P.row(i).array() - mean).square().mean();
      const VectorXd centred = P.row(i).transpose().array() - mean;
      X.row(i) = (centred.array() / std::sqrt(var + ln1.eps) * g.array() + beta.array()).matrix().transpose();
    }
  }
  const int64_t kv = head / (block.attn.n_heads / block.attn.n_kv_heads);  // the query head's kv head
  const MatrixXd Wq = to_matrix(block.attn.wq.weight).middleRows(head * dk, dk);
  const MatrixXd Wk = to_matrix(block.attn.wk.weight).middleRows(kv * dk, dk);
  auto head_bias = [&](const ag::Tensor<float>& bias, int64_t h) {
    return bias.defined() ? to_vector(bias).segment(h * dk, dk).eval() : VectorXd::Zero(dk).eval();
  };
  const VectorXd bq = head_bias(block.attn.wq.bias, head), bk = head_bias(block.attn.wk.bias, kv);
  MatrixXd q = (X * Wq.transpose()).rowwise() + bq.transpose();
  MatrixXd k = (X * Wk.transpose()).rowwise() + bk.transpose();
  // QK-norm: each row RMS-normalised with the head's q_norm (k_norm) weight, as the model does.
  auto qk_normed = [&](MatrixXd& m, const std::unique_ptr<nn::RMSNorm<float>>& norm) {
    if (!norm) return;
    const VectorXd w = to_vector(norm->weight);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      m.row(i) = (m.row(i).array() / std::sqrt(m.row(i).squaredNorm() / double(dk) + double(norm->eps)) *
                  w.transpose().array())
                     .matrix();
  };
  qk_normed(q, block.attn.q_norm);
  qk_normed(k, block.attn.k_norm);
  if (block.attn.rotary_dims) {  // row i turned by position i, as the model turns them (ag::rotary)
    auto turn = [&](MatrixXd& m) {
      std::vector<double> rows(static_cast<size_t>(positions * dk));
      for (int i = 0; i < positions; ++i)
        for (int64_t j = 0; j < dk; ++j) rows[i * dk + j] = m(i, j);
      const std::vector<double> turned = ag::rotary(ag::Tensor<double>::from({1, positions, dk}, rows), dk,
                                                    block.attn.rotary_dims, block.attn.rotary_base)
                                             .to_vector();
      for (int i = 0; i < positions; ++i)
        for (int64_t j = 0; j < dk; ++j) m(i, j) = turned[i * dk + j];
    };
    turn(q);
    turn(k);
  }
  const double scale =
      block.attn.attn_scale == nn::AttnScale::none ? 1.0 : 1.0 / std::sqrt(static_cast<double>(dk));
  const MatrixXd scores = q * k.transpose() * scale;
  std::vector<std::vector<double>> w(positions, std::vector<double>(positions, 0.0));
  for (int i = 0; i < positions; ++i) {
    // Causal, and with a local layer 0 only the keys (i - window, i].
    const int first =
        block.attn.window > 0 ? std::max<int>(0, i - static_cast<int>(block.attn.window) + 1) : 0;
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
  const int L = static_cast<int>(model.blocks.size()), H = static_cast<int>(model.shape.n_heads);
  const int64_t D = model.shape.d_model, dk = D / H, T = batch.T;
  const MatrixXd WU = unembedding(model);
  const VectorXd mean_u = WU.rowwise().mean();
  std::vector<MatrixXd> WO;  // per layer: wo.weight (D x D), so head h's output is z_h . wo[:, h*dk..]^T
  for (int l = 0; l < L; ++l) WO.push_back(to_matrix(model.blocks[l]->attn.wo.weight));
  const bool mlp = model.blocks.front()->mlp != nullptr;
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
  const nn::Norm<float>& ln_f = *model.ln_f;
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
      if (ln_f.normalises()) {
        const VectorXd x = row(final_resid, r);
        const double mean = ln_f.centres() ? x.mean() : 0.0;
        const double sigma = std::sqrt((x.array() - mean).square().mean() + ln_f.eps);
        // Centring c before the dot equals dotting c with the centred direction.
        if (ln_f.centres()) g = (g.array() - g.mean()).matrix();
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
  const int L = static_cast<int>(model.blocks.size()), H = static_cast<int>(model.shape.n_heads);
  if (with_composition && L < 2)
    throw std::invalid_argument("composition needs a model with at least 2 layers; this one has " +
                                std::to_string(L));
  findings::CircuitsResult r;
  if (with_composition) {
    r.composition = composition_scores(model);
    r.baseline = composition_baseline(model.shape.d_model, model.shape.d_model / H);
  }
  const DirectLogitAttribution dla = direct_logit_attribution(model, held_out);
  const MatrixXd ue = unembedding(model) * to_matrix(model.tok_emb.weight);
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
  const int L = static_cast<int>(run.model->blocks.size());
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
