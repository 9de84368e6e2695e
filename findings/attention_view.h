// What `attograd forward`, `attend` and `compare` report as plain data, their JSON (`--json`, the Python
// module's Run.forward_report, Run.attend, Run.compare) and their terminal text:
//   forward: {"ids": [...], "tokens": [...], "logits": [[V floats] x T], "predictions": [T ids],
//             "attention": [{"layer", "head", "weights": [[T floats] x T]}]}
//   attend:  {"ids", "tokens", "attention"} as forward's, with only the chosen heads
//   compare: {"a": attend's object for A, "b": for B, "heads": [{"layer", "head", "total_variation"}]}
// Total variation of two maps: the mean over query rows of 0.5 * sum_j |A[i][j] - B[i][j]| (0: the head
// looks the same way on both inputs, 1: at disjoint keys). Not for computing maps (analysis/attention.h
// does).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "findings/attention_maps.h"

namespace findings {

struct ForwardResult {
  Probe probe;                             // the input and every head's map
  std::vector<std::vector<float>> logits;  // [T][V]
  std::vector<int> predictions;            // [T] the argmax of each row (ties: the lowest id)
  std::vector<std::string> predicted;      // their names ("<id N>" beyond the task's vocabulary)
};

nlohmann::json forward_to_json(const ForwardResult& r);
// The predicted next token at every position, then every head's map.
std::string forward_table(const ForwardResult& r);

// The probe's ids, tokens and maps as "attention" (forward's and attend's shape).
nlohmann::json probe_to_json(const Probe& probe);

struct AttendResult {
  Probe probe;             // the chosen heads' maps, by (layer, head)
  bool every_head = true;  // no layer or head was chosen: drawn compactly
};

nlohmann::json attend_to_json(const AttendResult& r);
// Every head compactly, or each chosen head full size with its weight table.
std::string attend_table(const AttendResult& r);

struct HeadChange {
  int layer = 0, head = 0;
  double total_variation = 0;
};

struct CompareResult {
  Probe a, b;                     // the chosen heads' maps on each input, by (layer, head)
  std::vector<HeadChange> heads;  // the same order
};

double total_variation(const AttentionWeights& a, const AttentionWeights& b);

nlohmann::json compare_to_json(const CompareResult& r);
// Per head: A's map, B's map and A - B side by side; then the heads by total variation, most changed first.
std::string compare_table(const CompareResult& r);

// The first `n` lines of a rendered picture (drops trailing legend lines), or all when n < 0.
std::vector<std::string> text_lines(const std::string& text, int n = -1);
// Panels next to each other, `gap` columns apart, each padded to its widest line (UTF-8 aware); trailing
// spaces trimmed.
std::string side_by_side(const std::vector<std::vector<std::string>>& panels, int gap = 3);

}  // namespace findings
