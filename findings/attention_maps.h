// Attention maps as plain data, and their JSON form RUN/attention/step-NNNNNN.json
// (docs/architecture.md "The run folder"):
//   {"step": N, "probes": [{"ids": [...], "tokens": [...],
//                           "maps": [{"layer": l, "head": h, "weights": [[...] x T]}]}]}
// This file knows nothing of the model or the trainer: analysis/capture.h fills these structs through the
// model's hooks, and the renderers (ascii_heatmap, svg_heatmap, report_html) and head_scores read them.
// Not for drawing or scoring: those live in their own files.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

// One head's attention weights for one input: weights[i][j] is how much query (destination) position i
// takes from key (source) position j. Rows of a causal softmax sum to 1 and are 0 for j > i.
using AttentionWeights = std::vector<std::vector<float>>;  // [T query][T key]

// Throws std::invalid_argument "<what>: expected a T x T map, ..." unless every row is as long as the map.
void check_square(const AttentionWeights& w, const char* what);

// How every picture and table names a head: "L1 H2" (layer and head from 0).
std::string head_name(int layer, int head);

struct HeadMap {
  int layer = 0;  // from 0
  int head = 0;   // from 0
  AttentionWeights weights;
};

// One probe input and every head's map on it.
struct Probe {
  std::vector<int> ids;             // [T] token ids
  std::vector<std::string> tokens;  // [T] the task's token names, as it prints them
  std::vector<HeadMap> maps;        // any order; (layer, head) pairs are unique
};

struct AttentionDump {
  int64_t step = 0;
  std::vector<Probe> probes;
};

// Weights are written rounded to 1e-6: a float printed as a double ("0.20000000298023224") would triple
// the file for digits that mean nothing in a picture or a score.
nlohmann::json attention_dump_to_json(const AttentionDump& dump);
// One [T][T] map as JSON rows, each weight rounded to a multiple of 1/scale (1e6 in dumps, 1e3 in
// report.html).
nlohmann::json weights_to_json(const AttentionWeights& w, double scale);

// report.html's compact form of one causal map: the lower triangle (j <= i, row by row, T(T+1)/2 weights)
// in fixed point, one byte per weight (round(w * 255), resolution 1/255, finer than the colour scale's
// 1/100 steps), as base64. The masked cells (j > i) are not stored: a causal softmax makes them 0.
// Throws std::invalid_argument unless the map is T x T.
std::string lower_triangle_base64(const AttentionWeights& w);
// The inverse (the page's script does the same): a T x T map with the upper triangle 0. Throws
// std::invalid_argument when the text is not base64 of T(T+1)/2 bytes.
AttentionWeights lower_triangle_from_base64(const std::string& text, size_t T);

// Validates while reading. `source` (a file name) starts every error message; errors are
// std::runtime_error with one line "SOURCE: /json/pointer: expected ..., got ...".
// Checks: ids and tokens have the same length T >= 1; every map has T rows of T finite weights in [0, 1]
// (1e-3 slack for rounding); layer and head are integers >= 0 and unique within a probe.
// Unknown keys are ignored, so a writer may add fields without breaking older readers.
AttentionDump attention_dump_from_json(const nlohmann::json& j, const std::string& source);

// Reads and validates one file; parse errors also name the file.
AttentionDump read_attention_dump(const std::string& path);
// Writes atomically (PATH.tmp then rename); creates the folder if missing.
void write_attention_dump(const std::string& path, const AttentionDump& dump);
// Every step-*.json in `dir` (e.g. RUN/attention), sorted by step; an absent folder gives none.
std::vector<AttentionDump> read_attention_dumps(const std::string& dir);

// The probe's maps grouped for drawing: one entry per layer present (ascending), each holding that
// layer's maps sorted by head. The pointers point into `probe` and live as long as it does.
std::vector<std::vector<const HeadMap*>> maps_by_layer(const Probe& probe);

}  // namespace findings
