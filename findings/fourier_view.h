// A modular-addition model read in the Fourier basis of Z_p, as plain data (analysis/fourier.h computes it),
// its JSON (`attograd fourier --json`, RUN/fourier.json), its progress-measure lines (RUN/measures.jsonl),
// the terminal summary and the SVGs. docs/grokking.md defines every number.
//   {"p", "key_frequencies": [k...], "embed_norms": [k = 1..(p-1)/2], "unembed_norms",
//    "neuron_logit_norms", "neurons": [{"index", "frequency", "explained"}], "train_loss", "test_loss",
//    "train_acc", "test_acc", "restricted_loss", "excluded_loss", "gini_embed", "gini_neuron_logit",
//    "weight_norm_sq"}
// Not for computing anything (no model here).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct FourierNeuron {
  int index = 0;
  int frequency = 0;     // its best single frequency k (1..(p-1)/2)
  double explained = 0;  // the fraction of its variance over the p^2 inputs that frequency explains
};

// The numbers that are measured over training too (measures.jsonl), with the step they were taken at.
struct FourierMeasures {
  int64_t step = 0;
  double train_loss = 0, test_loss = 0, train_acc = 0, test_acc = 0;
  double restricted_loss = 0, excluded_loss = 0;
  double gini_embed = 0, gini_neuron_logit = 0, weight_norm_sq = 0;
  std::vector<int> key_frequencies;
};

// The fraction of a neuron's variance its best frequency must explain for the neuron to count in that
// frequency's cluster (the key-frequency rule, docs/grokking.md; the summary counts the same neurons).
constexpr double kNeuronExplained = 0.85;

struct FourierReport {
  int p = 0;
  FourierMeasures measures;
  std::vector<double> embed_norms, unembed_norms, neuron_logit_norms;  // index k-1 for frequency k
  std::vector<FourierNeuron> neurons;                                  // one per MLP neuron, by index
  // For the pictures: each neuron's explained fraction per frequency [neuron][k-1], and the logits of value
  // class `logit_class` at the answer position over all pairs [a][b].
  std::vector<std::vector<double>> neuron_explained;
  int logit_class = 0;
  std::vector<std::vector<double>> class_logits;
};

// The schema above (the keys).
nlohmann::json fourier_to_json(const FourierReport& r);
// Reads fourier_to_json's keys back (the per-neuron explained fractions by frequency and the class logits,
// which the JSON does not hold, stay empty); errors are std::runtime_error "SOURCE: /key: expected ...".
FourierReport fourier_from_json(const nlohmann::json& j, const std::string& source);
// One line of measures.jsonl: {"step", "train_loss", ..., "weight_norm_sq", "key_frequencies"}.
nlohmann::json measures_to_json(const FourierMeasures& m);
// Every line of a measures.jsonl file; errors are std::runtime_error "FILE:LINE: what was expected".
std::vector<FourierMeasures> read_measures(const std::string& path);

// Terminal: the key frequencies, the losses and accuracies, the Gini coefficients and the spectra's top
// frequencies.
std::string fourier_summary(const FourierReport& r);

// The three spectra (embedding, unembedding, neuron-logit map) as bar charts over k, key frequencies
// marked.
std::string fourier_spectra_svg(const FourierReport& r);
// Neurons (rows, grouped by frequency, then by explained fraction) by frequency (columns): the explained
// fraction.
std::string fourier_neurons_svg(const FourierReport& r);
// The logits of one value class over (a, b).
std::string fourier_logits_svg(const FourierReport& r);
// The progress measures over steps (log-scale losses, restricted and excluded loss, Gini coefficients,
// weight norm), with the phase boundaries marked: the paper's figures.
std::string measures_svg(const std::vector<FourierMeasures>& measures);

// The three phases of grokking as a rule finds them in the measures (docs/grokking.md): memorisation ends
// at the first step with train_acc 1; circuit formation ends where the excluded loss peaks after it;
// cleanup ends at the first step with test_acc >= 0.99. -1 where a phase is not found.
struct GrokkingPhases {
  int64_t memorised = -1, circuit_formed = -1, generalised = -1;
};
GrokkingPhases grokking_phases(const std::vector<FourierMeasures>& measures);

}  // namespace findings
