// Activation patching results as plain data (study/patching.h computes them), their JSON
// (`attograd patch --json` and RUN/patching/NAME.json), the terminal heatmap and the SVG.
//   {"answer": ID, "wrong": ID, "clean": float, "corrupt": float,
//    "resid_pre": [{"layer", "position", "recovered"}],
//    "head_z": [{"layer", "head", "position", "recovered"}],
//    "head_all": [{"layer", "head", "recovered"}]}
// resid_pre's layer runs 0..n_layers: layer n_layers stands for the last layer's resid_post (the stream
// that reaches ln_f), as TransformerLens counts it. Saved files add "clean_tokens", "corrupt_tokens",
// "answer_token" and "wrong_token" so the pictures can be labelled later; readers ignore unknown keys.
// Not for computing anything (no model here).
#pragma once

#include <nlohmann/json.hpp>
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

struct PatchingResult {
  int answer = 0, wrong = 0;      // token ids of the metric logit[answer] - logit[wrong] at the last position
  double clean = 0, corrupt = 0;  // the unpatched runs' logit differences
  std::vector<ResidPatch> resid_pre;      // by (layer, position); layer n_layers = last resid_post
  std::vector<HeadPositionPatch> head_z;  // by (layer, head, position)
  std::vector<HeadPatch> head_all;        // by (layer, head)
  // Labels (not in --json): the inputs' and the metric's token names.
  std::vector<std::string> clean_tokens, corrupt_tokens;
  std::string answer_token, wrong_token;
};

// The schema only (`--json`), or with the labels too (the saved file).
nlohmann::json patching_to_json(const PatchingResult& r, bool with_labels);
// Validates the schema's keys and types; errors are std::runtime_error "SOURCE: /pointer: expected ...".
PatchingResult patching_from_json(const nlohmann::json& j, const std::string& source);
PatchingResult read_patching(const std::string& path);
// The saved file (with the labels), atomically; a result its reader would refuse throws instead, so no
// file is ever written that read_patching rejects.
void write_patching(const std::string& path, const PatchingResult& r);
// Every RUN/patching/*.json, by file name; `names` gets each file's stem.
std::vector<PatchingResult> read_patchings(const std::string& dir, std::vector<std::string>* names);

// Terminal: the two unpatched numbers, then a heatmap per family (rows: resid_pre per layer and the last
// resid_post; every head's z; columns: positions labelled with the clean tokens), each cell the recovered
// fraction as a sign and a level of |recovered| on the fixed scale 0..1, and the largest entries listed.
std::string patching_table(const PatchingResult& r, int width = 100);
// Two heatmaps (layer x position, head x position, plus a column "all" for every position at once) on a
// diverging scale centred on 0, labelled with the tokens (clean/corrupt where they differ).
std::string svg_patching(const PatchingResult& r, const std::string& title);

}  // namespace findings
