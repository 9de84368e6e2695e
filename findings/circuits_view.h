// Weight-based circuit analysis as plain data (analysis/circuits.h computes it), its JSON (RUN/circuits.json,
// `attograd circuits --json`), terminal tables and SVGs:
//   {"composition": [{"from": [layer, head], "to": [layer, head], "q", "k", "v"}],
//    "baseline": {"q", "k", "v"},   (null when composition was skipped: a one-layer model)
//    "heads": [{"layer", "head", "copying", "prev_token_positional", "dla"}],
//    "components": [{"name", "dla"}]}   (embeddings and each MLP; attention-only models have no MLPs)
// prev_token_positional is null for heads past layer 0. The file adds "step" and "positional" (layer 0's
// positional QK maps: [{"head", "weights": [[...]]}]). Readers ignore unknown keys.
// docs/circuits.md gives every formula. Not for computing (no model here).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace findings {

struct CompositionScore {
  int from_layer = 0, from_head = 0, to_layer = 0, to_head = 0;
  double q = 0, k = 0, v = 0;
};

struct CompositionBaseline {
  double q = 0, k = 0, v = 0;
};

struct HeadCircuit {
  int layer = 0, head = 0;
  double copying = 0;                           // eigenvalue copying score of W_E OV W_U, in [-1, 1]
  std::optional<double> prev_token_positional;  // layer 0 only
  double dla = 0;                               // direct logit attribution on the held-out set
};

struct ComponentDla {
  std::string name;  // "embed", "blocks.L.mlp"
  double dla = 0;
};

struct PositionalMap {
  int head = 0;
  std::vector<std::vector<double>> weights;  // [T query][T key], causal softmax rows
};

struct CircuitsResult {
  int64_t step = 0;
  std::vector<CompositionScore> composition;    // every (earlier head, later head) pair, by (from, to)
  std::optional<CompositionBaseline> baseline;  // absent when composition was skipped
  std::vector<HeadCircuit> heads;               // by (layer, head)
  std::vector<ComponentDla> components;
  std::vector<PositionalMap> positional;  // layer 0's heads
};

// The schema plus "components"; with_file_extras adds "step" and "positional".
nlohmann::json circuits_to_json(const CircuitsResult& r, bool with_file_extras);
// Validates the keys above; std::runtime_error "SOURCE: /pointer: expected ..." on a bad field.
CircuitsResult circuits_from_json(const nlohmann::json& j, const std::string& source);
CircuitsResult read_circuits(const std::string& path);
// Atomic; a result its reader would refuse throws instead, so no file read_circuits rejects is written.
void write_circuits(const std::string& path, const CircuitsResult& r);

// Terminal: the per-head table (copying, positional prev-token mass, DLA), the components' DLA, and the
// composition scores of each later head with the baseline beside them ('*': the largest of each kind for
// that later head).
std::string circuits_table(const CircuitsResult& r);
// Three panels (Q, K, V) of earlier heads (rows) x later heads (columns) on one 0..max scale; empty when
// there is no composition.
std::string svg_composition(const CircuitsResult& r, const std::string& title);
// Layer 0's positional QK maps as an attention grid (positions as tokens); empty when there are none.
std::string svg_positional(const CircuitsResult& r, const std::string& title);

}  // namespace findings
