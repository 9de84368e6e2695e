// Reading a model's circuit from its weights (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"), plus direct logit attribution from real forward passes. Row-vector convention, PyTorch's
// Linear layout (weight [out, in]); head h owns rows [h*dk, (h+1)*dk) of wq/wk/wv and columns of wo:
//   W_Q^h, W_K^h, W_V^h (D x dk): the head's rows of wq/wk/wv, transposed, row d scaled by ln1.weight[d]
//   (LayerNorm's scale folded in; biases ignored); W_O^h (dk x D): the head's columns of wo, transposed.
//   QK^h = W_Q^h W_K^h^T, OV^h = W_V^h W_O^h (D x D).
// Composition of head A (layer l) into head B (layer l' > l), score(M, X, Y) = ||M||_F / (||X||_F ||Y||_F):
//   Q: M = OV^A QK^B;  K: M = OV^A QK^B^T;  V: M = OV^A OV^B.
// docs/circuits.md gives the rest (copying, positional QK, DLA) and what they show on the shipped configs.
// Computed in double with Eigen; the model is read, never changed.
#pragma once

#include <Eigen/Dense>

#include "analysis/tool.h"
#include "findings/circuits_view.h"
#include "nn/transformer.h"
#include "train/tasks.h"

namespace analysis {

struct HeadWeights {
  Eigen::MatrixXd WQ, WK, WV, WO;  // D x dk (ln1 folded), D x dk, D x dk, dk x D
  Eigen::MatrixXd QK() const { return WQ * WK.transpose(); }
  Eigen::MatrixXd OV() const { return WV * WO; }
};

HeadWeights head_weights(const nn::CausalLM<float>& model, int layer, int head);

// ||M||_F / (||X||_F ||Y||_F).
double composition_score(const Eigen::MatrixXd& M, const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y);

// Every pair (A in layer l, B in layer l' > l), sorted by (from, to).
std::vector<findings::CompositionScore> composition_scores(const nn::CausalLM<float>& model);

// The mean score over `pairs` draws of X = G1 G2 and Y = G3 G4 with standard Gaussian G1, G3 (D x dk) and
// G2, G4 (dk x D): random matrices with the shapes and rank of OV^A and QK^B (or OV^B). Q and V use M = X Y,
// K uses M = X Y^T; each kind has its own draws, from ag::Rng(seed).
findings::CompositionBaseline composition_baseline(int64_t d_model, int64_t dk, int pairs = 100,
                                                   uint64_t seed = 0xC0FFEEULL);

// W_E OV^h W_U (V x V) with W_E = tok_emb.weight, W_U = lm_head.weight^T with ln_f.weight folded in
// row-wise; the copying score is sum Re(lambda) / sum |lambda| over its eigenvalues, read from the dk x dk
// matrix W_O^h W_U W_E W_V^h that has the same nonzero ones (any vocabulary: no V x V matrix is formed).
double copying_score(const nn::CausalLM<float>& model, int layer, int head);

// Layer 0's head on positions alone: X = ln1(pos_emb.weight[0..T)) (weight and bias), q = X wq_h^T + bq_h,
// k = X wk_h^T + bk_h, the causal softmax of q k^T / sqrt(dk) (T x T). With rotary positions every row of
// X is ln1 of the mean token embedding and row i of q and k is turned by position i, so a score depends on
// the offset i - j alone (each diagonal of the map is one offset). Throws std::invalid_argument for a
// model without positions (model.positions none). With qk_norm, q and k are normalised by the head's
// q_norm and k_norm before the rotation, as in the model.
std::vector<std::vector<double>> positional_qk(const nn::CausalLM<float>& model, int head, int positions);
// The most positions the circuits tool reads the positional maps at: each is positions^2 per head in
// circuits.json and its picture (GPT-2's 1,024 would be a 12 M-cell map per head).
constexpr int kMaxPositionalMap = 128;
// The mean over rows i >= 1 of w[i][i-1].
double previous_token_mass(const std::vector<std::vector<double>>& w);

struct DirectLogitAttribution {
  std::vector<double> heads;  // [layer * n_heads + head]
  double embed = 0;           // tok_emb + pos_emb (blocks.0.resid_pre)
  std::vector<double> mlps;   // per layer; empty for attention-only models
};

// For each scored position (target != -1) of `batch`, each component's output c (a head's z^h W_O^h, the
// embeddings, an MLP's output) centred over d_model when ln_f centres (LayerNorm removes the mean; RMSNorm
// does not) and divided by ln_f's standard deviation (RMSNorm: root mean square) at that position in the
// actual forward, dotted with W_U[:, target] - mean_v W_U[:, v];
// averaged over the scored positions. Throws std::invalid_argument when no position is scored. The forwards
// run `chunk` sequences at a time, fewer when their intermediates would pass 256 MB (a GPT-2-sized model:
// one), which changes no sum's order.
DirectLogitAttribution direct_logit_attribution(const nn::CausalLM<float>& model, const train::Batch& batch,
                                                int chunk = 256);

// Everything above for `attograd circuits` and the end of training. `positions` is the positional maps'
// T (the task's sequence length, at most max_len). with_composition false skips the composition scores and
// the baseline; true on a one-layer model throws std::invalid_argument (composition needs two layers).
findings::CircuitsResult analyse_circuits(const nn::CausalLM<float>& model, const train::Batch& held_out,
                                          int positions, bool with_composition);

// The tool (`attograd circuits`, Run.circuits in Python): the analysis of a run's checkpoint with DLA on its
// held-out set (run_study.h's run_circuits), or of its TransformerLens-processed weights (processing.h).
struct CircuitsRequest {
  bool composition = true;  // the composition scores and baseline (the model needs >= 2 layers)
  bool processed = false;   // read the processed weights (LayerNorms folded, centred); never saved
  bool save = false;        // write RUN/circuits.json and RUN/circuits/*.svg and rebuild report.html
};

Output<findings::CircuitsResult> circuits(StudyRun& run, const CircuitsRequest& request);

}  // namespace analysis
