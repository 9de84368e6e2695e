// attograd entropy's result as plain data (analysis/entropy.h computes it), its JSON
//   {"step": N, "sequences": B, "rows": R, "uniform": U, "layers": [{"layer", "entropy"}],
//    "heads": [{"layer", "head", "entropy"}]}
// and its table for the terminal. Entropies are in nats, means over the R attention rows read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct HeadEntropy {
  int layer = 0, head = 0;
  double entropy = 0;
};

struct EntropyResult {
  int64_t step = 0;
  int sequences = 0;
  int64_t rows = 0;    // the query positions averaged over (every sequence's, padding left out)
  double uniform = 0;  // the mean over the same rows of log(i + 1): a head that looks everywhere evenly
  std::vector<double> layers;      // per layer, the mean over its heads
  std::vector<HeadEntropy> heads;  // by (layer, head)
};

inline nlohmann::json entropy_to_json(const EntropyResult& r) {
  nlohmann::json layers = nlohmann::json::array(), heads = nlohmann::json::array();
  for (size_t l = 0; l < r.layers.size(); ++l) layers.push_back({{"layer", l}, {"entropy", r.layers[l]}});
  for (const HeadEntropy& h : r.heads)
    heads.push_back({{"layer", h.layer}, {"head", h.head}, {"entropy", h.entropy}});
  return {{"step", r.step},       {"sequences", r.sequences}, {"rows", r.rows},
          {"uniform", r.uniform}, {"layers", layers},         {"heads", heads}};
}

// What entropy_to_json wrote (a document of another shape throws nlohmann::json's exceptions).
inline EntropyResult entropy_from_json(const nlohmann::json& j) {
  EntropyResult r;
  r.step = j.at("step").get<int64_t>();
  r.sequences = j.at("sequences").get<int>();
  r.rows = j.at("rows").get<int64_t>();
  r.uniform = j.at("uniform").get<double>();
  for (const nlohmann::json& l : j.at("layers")) r.layers.push_back(l.at("entropy").get<double>());
  for (const nlohmann::json& h : j.at("heads"))
    r.heads.push_back({h.at("layer").get<int>(), h.at("head").get<int>(), h.at("entropy").get<double>()});
  return r;
}

// One line per head: its entropy and its share of the uniform head's; then each layer's mean.
inline std::string entropy_table(const EntropyResult& r) {
  std::string out = "layer head  entropy  of uniform\n";
  char line[96];
  const auto share = [&](double e) { return r.uniform > 0 ? 100.0 * e / r.uniform : 0.0; };
  for (const HeadEntropy& h : r.heads) {
    std::snprintf(line, sizeof line, "%5d %4d %8.3f %10.0f%%\n", h.layer, h.head, h.entropy,
                  share(h.entropy));
    out += line;
  }
  for (size_t l = 0; l < r.layers.size(); ++l) {
    std::snprintf(line, sizeof line, "%5zu mean %8.3f %10.0f%%\n", l, r.layers[l], share(r.layers[l]));
    out += line;
  }
  return out;
}

}  // namespace findings
