// Activation patching results as plain data (analysis/patching.h computes them), their JSON
// (`attograd patch --json` and RUN/patching/NAME.json), the terminal heatmap and the SVG.
//   {"answer": ID, "wrong": ID, "clean": float, "corrupt": float,
//    "resid_pre": [{"layer", "position", "recovered"}],
//    "head_z": [{"layer", "head", "position", "recovered"}],
//    "head_all": [{"layer", "head", "recovered"}],
//    "head_q", "head_k", "head_v": [{"layer", "head", "position", "recovered"}],  (when measured)
//    "head_pattern": [{"layer", "head", "recovered"}],                           (when measured)
//    "attribution": {the same lists, each entry the first-order estimate}}       (when estimated)
// resid_pre's layer runs 0..n_layers: layer n_layers stands for the last layer's resid_post (the stream
// that reaches ln_f), as TransformerLens counts it. Saved files add "clean_tokens", "corrupt_tokens",
// "answer_token" and "wrong_token" so the pictures can be labelled later; readers ignore unknown keys.
// Not for computing anything (no model here).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace findings {

struct ResidPatch {
  int layer = 0, position = 0;
  double recovered = 0;
};
struct HeadPositionPatch {
  int layer = 0, head = 0, position = 0;
  double recovered = 0;
};
struct HeadPatch {
  int layer = 0, head = 0;
  double recovered = 0;
};

// One number per activation of each kind: the recovered fraction of a real patch, or its attribution
// estimate. Empty lists: not measured.
struct PatchEffects {
  std::vector<ResidPatch> resid_pre;      // by (layer, position); layer n_layers = last resid_post
  std::vector<HeadPositionPatch> head_z;  // by (layer, head, position)
  std::vector<HeadPatch> head_all;        // by (layer, head): z at every position at once
  std::vector<HeadPositionPatch> head_q, head_k, head_v;  // by (layer, head, position)
  std::vector<HeadPatch> head_pattern;                    // by (layer, head): the whole pattern
};

// The kinds of PatchEffects, by their JSON names, in the order above.
const std::vector<std::string>& patch_kinds();
// The values of one kind, in the list's order.
std::vector<double> patch_values(const PatchEffects& e, const std::string& kind);

struct PatchingResult : PatchEffects {
  int answer = 0, wrong = 0;      // token ids of the metric logit[answer] - logit[wrong] at the last position
  double clean = 0, corrupt = 0;  // the unpatched runs' logit differences
  // Attribution patching's estimates (analysis/patching.h), when computed.
  std::optional<PatchEffects> attribution;
  // Labels (not in --json): the inputs' and the metric's token names.
  std::vector<std::string> clean_tokens, corrupt_tokens;
  std::string answer_token, wrong_token;
};

// The schema only (`--json`), or with the labels too (the saved file).
nlohmann::json patching_to_json(const PatchingResult& r, bool with_labels);
// Validates the schema's keys and types; errors are std::runtime_error "SOURCE: /pointer: expected ...".
PatchingResult patching_from_json(const nlohmann::json& j, const std::string& source);
PatchingResult read_patching(const std::string& path);
// The saved file's text (patching_to_json with labels), read back first: a value its reader refuses (a NaN
// written as null) is a std::runtime_error naming `path` "(not written)", not a file.
std::string patching_file_text(const PatchingResult& r, const std::string& path);
// Every RUN/patching/*.json, by file name; `names` gets each file's stem.
std::vector<PatchingResult> read_patchings(const std::string& dir, std::vector<std::string>* names);

// Terminal: the two unpatched numbers, then a heatmap per family (rows: resid_pre per layer and the last
// resid_post; every head's z; columns: positions labelled with the clean tokens), each cell the recovered
// fraction as a sign and a level of |recovered| on the fixed scale 0..1, and the largest entries listed.
std::string patching_table(const PatchingResult& r, int width = 100);
// Pearson's correlation between the real patches and the attribution estimates of each kind both have (NaN
// when one side is constant), as (kind, r) in patch_kinds() order.
std::vector<std::pair<std::string, double>> attribution_correlations(const PatchingResult& r);
// The attribution beside the real patching: per kind the correlation, and the entries that the two rank
// highest.
std::string attribution_table(const PatchingResult& r);

// Two heatmaps (layer x position, head x position, plus a column "all" for every position at once) on a
// diverging scale centred on 0, labelled with the tokens (clean/corrupt where they differ).
std::string svg_patching(const PatchingResult& r, const std::string& title);

}  // namespace findings
