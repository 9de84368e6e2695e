// A modular-addition model in the Fourier basis of Z_p (Nanda et al. 2023, "Progress measures for grokking
// via mechanistic interpretability"): the spectra of its embedding, unembedding and neuron-logit map, its
// neurons' frequencies, the key frequencies, the restricted and excluded losses and the Gini coefficients.
// docs/grokking.md defines each number; findings/fourier_view.h holds the result and draws it.
//
// F is the Fourier basis of Z_p (p odd): row 0 the constant 1/sqrt(p), rows 2k-1 and 2k cos(2 pi k x / p)
// and sin(2 pi k x / p) for k = 1..(p-1)/2, each scaled to unit norm, so F is orthonormal.
//
// Not for training: progress_measures.h runs this during a run.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/tool.h"
#include "findings/fourier_view.h"
#include "nn/transformer.h"
#include "train/task.h"

namespace analysis {

// What the analysis reads of a modular-addition task (kind modadd or modadd_bare, 2 operands, an odd
// modulus p): every pair's input and which side of the split it is on.
struct ModularAddition {
  int p = 0, T = 0;
  int answer_position = 0;         // the input position that predicts c ("=")
  std::vector<int32_t> value_ids;  // the token id of each value 0..p-1
  std::vector<int32_t> inputs;     // p^2 rows of T ids; pair (a, b) is row a * p + b
  std::vector<uint8_t> held_out;   // p^2: 1 for a held-out pair
};

// Throws std::invalid_argument (one line) when the task is not modular addition of 2 operands with an odd
// modulus.
ModularAddition modular_addition(const train::Task& task);

// The share of the MLP's neurons (at least 2) a frequency's cluster (findings::kNeuronExplained) needs to
// make the frequency key.
constexpr double kKeyClusterShare = 0.01;

// The whole analysis of the model on every pair; `step` is recorded in measures.step. Needs a model with an
// MLP (the last block's is read); throws std::invalid_argument otherwise.
findings::FourierReport fourier_analysis(const nn::CausalLM<float>& model, const ModularAddition& data,
                                         int64_t step = 0);

// The Gini coefficient of non-negative values (Hurley and Rickard 2009): with c sorted ascending,
// 1 - 2 sum_i (c_i / ||c||_1) (N - i + 1/2) / N for i = 1..N; 0 for all-equal values, near 1 when one
// value holds everything (0 for an all-zero vector).
double gini(std::vector<double> values);

// The tool (`attograd fourier`, Run.fourier in Python): the analysis of a modular-addition run's
// checkpoint over all p^2 pairs. RequestError naming the run when its task is not modular addition of 2
// operands with an odd modulus or its model has no MLP.
struct FourierRequest {
  bool save = false;  // write RUN/fourier/ (fourier.json and the SVGs) and rebuild report.html
};

Output<findings::FourierReport> fourier(StudyRun& run, const FourierRequest& request);

}  // namespace analysis
