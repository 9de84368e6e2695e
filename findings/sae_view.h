// A sparse autoencoder's findings as plain data, their JSON (features.json, and eval.json read back) and
// the self-contained page that lists them (features.html): each feature's density, top-activating held-out
// examples with the activation per token, and its decoder direction's logit effect; and the feature-density
// histogram as a small SVG (features.html and the run report draw it). Computing them is
// dictionary/sae_eval.h's job; the run report's section is report_sae.h's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace findings {

struct SaeExample {
  int64_t sequence = 0;             // index in the held-out set
  int position = 0;                 // the token where the feature peaks
  float max = 0;                    // the activation there
  std::vector<std::string> tokens;  // the sequence's token names
  std::vector<float> acts;          // the feature's activation at each token (0 where not computed)
};

struct SaeFeature {
  int64_t index = 0;
  double density = 0;                                     // fraction of held-out tokens where it is active
  std::vector<SaeExample> examples;                       // strongest first
  std::vector<std::pair<std::string, float>> promoted;    // top logit effects, largest first
  std::vector<std::pair<std::string, float>> suppressed;  // most negative first
};

nlohmann::json sae_features_to_json(const std::vector<SaeFeature>& features);

// features.html shows each example as a window of its sequence around the peak: this many tokens before
// the peak token and after it (features.json keeps the whole sequence).
inline constexpr int kSaeWindowBefore = 24, kSaeWindowAfter = 8;
// A token's shade on the page: its activation over the example's peak, in this many steps.
inline constexpr int kSaeShades = 8;

// The page: a title, the evaluation's numbers as a table with the density histogram (eval is eval.json's
// object), then every feature with at least one example, densest first (anchor "feature-N"): its density,
// logit effects and examples, each a window of kSaeWindowBefore + 1 + kSaeWindowAfter tokens with the
// peak boxed and the tokens shaded by activation (a class per shade step, the value as a tooltip).
std::string sae_features_html(const std::string& title, const nlohmann::json& eval,
                              const std::vector<SaeFeature>& features);

// eval.json: an SAE's evaluation at a hook point on held-out sequences (docs/sae.md defines each number).
struct SaeEvalSummary {
  std::string point;
  int64_t d_in = 0, d_sae = 0, tokens = 0, dead = 0;
  // NaN where eval.json holds null (a ratio whose denominator was 0).
  double mse = 0, explained_variance = 0, l0 = 0, ce_loss_recovered = 0, kl = 0;
  double ce_clean = 0, ce_with_sae = 0, ce_zero_ablation = 0;
  std::vector<std::string> density_bins;  // "dead", "[1e-6,1e-5)", ..., "[1e-1,1]"
  std::vector<int64_t> density_counts;    // features per bin, one per bin
};

// The density histogram's bins, as eval.json names them.
const std::vector<std::string>& sae_density_bins();

// eval.json's object (NaN written as null); `attograd sae --json` prints it on one line.
nlohmann::json sae_eval_to_json(const SaeEvalSummary& e);

// eval.json's object read back; a missing key or a value of the wrong type is one line
// "SOURCE: POINTER: WHAT" (io/json_error.h).
SaeEvalSummary sae_eval_from_json(const nlohmann::json& j, const std::string& source);

// The evaluation as three lines for the terminal: sizes, reconstruction, cross-entropy.
std::string sae_eval_table(const SaeEvalSummary& e);

// `sae synthetic`'s result: an SAE of d_sae features trained `steps` steps on `features` synthetic
// features in `dim` dimensions (each active with probability p), and how well it recovers them on
// samples it never saw: the mean over true features of the best cosine with a decoder row, the mean
// correlation of matched activations (MCC), the mean active features per sample, the never-active
// features, and the wall time.
struct SaeSyntheticResult {
  int64_t features = 0, dim = 0, d_sae = 0, steps = 0;
  double p = 0;
  double mean_max_cos = 0, mcc = 0, l0 = 0, seconds = 0;
  int64_t dead = 0;
};

// {"mean_max_cos", "mcc", "l0", "dead", "seconds"}.
nlohmann::json sae_synthetic_to_json(const SaeSyntheticResult& r);
std::string sae_synthetic_table(const SaeSyntheticResult& r);

// The density histogram as a small inline SVG bar chart (class "density"): one bar per bin, its height
// the bin's count over the largest, the dead bar red; each bar's tooltip gives its bin and count.
std::string sae_density_svg(const std::vector<std::string>& bins, const std::vector<int64_t>& counts);

}  // namespace findings
