// A sparse autoencoder's findings as plain data, their JSON (features.json) and the self-contained page
// that lists them (features.html): each feature's density, top-activating held-out examples with the
// activation per token, and its decoder direction's logit effect. Computing them is study/sae_eval.h's job.
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
// The page: a title, the evaluation's numbers as a table (eval is eval.json's object), then every feature
// with at least one example, densest first, its examples' tokens shaded by activation.
std::string sae_features_html(const std::string& title, const nlohmann::json& eval,
                              const std::vector<SaeFeature>& features);

}  // namespace findings
