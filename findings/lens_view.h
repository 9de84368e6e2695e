// The logit lens and the residual decomposition as plain data (analysis/residual.h computes them), their JSON
// (`attograd lens --json` and RUN/lens/NAME.json), the terminal table and the SVG.
//   {"answer": ID, "wrong": ID or null (null: the metric is the answer's logit minus the mean logit),
//    "positions": [token names],
//    "accumulated": [{"point", "position", "value"}],   points blocks.L.resid_pre, the last resid_post
//    "components": [{"name", "position", "value"}],     embed, pos_embed, blocks.L.attn.head.H,
//                                                       blocks.L.attn.bias, blocks.L.mlp, ln_f.bias,
//                                                       lm_head.bias
//    "actual": [{"position", "value"}]}
// Saved files add "answer_token" and "wrong_token" for the pictures' labels; readers ignore unknown keys.
// Not for computing anything (no model here).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct LensPointValue {
  std::string point;  // a hook point's name (blocks.L.resid_pre, blocks.L.resid_post)
  int position = 0;
  double value = 0;
};
struct LensComponentValue {
  std::string name;  // see above
  int position = 0;
  double value = 0;
};

struct LensResult {
  int answer = 0, wrong = -1;                  // wrong -1: the metric subtracts the mean logit
  std::vector<std::string> positions;          // the input's token names, one per position
  std::vector<LensPointValue> accumulated;     // by point (forward order), then position
  std::vector<LensComponentValue> components;  // by component (forward order), then position
  std::vector<double> actual;                  // the model's metric per position
  std::string answer_token, wrong_token;       // labels (saved files only); wrong_token "mean" for -1
};

// The schema only (`--json`), or with the labels too (the saved file).
nlohmann::json lens_to_json(const LensResult& r, bool with_labels);
// Validates the keys and types; errors are std::runtime_error "SOURCE: /pointer: expected ...".
LensResult lens_from_json(const nlohmann::json& j, const std::string& source);
// Every RUN/lens/*.json, by file name; `names` gets each file's stem.
std::vector<LensResult> read_lenses(const std::string& dir, std::vector<std::string>* names);

// Terminal: the accumulated rows, then the components, one column per position (the last `max_columns`
// positions when there are more), values with two decimals, and the largest components at the last
// position.
std::string lens_table(const LensResult& r, int max_columns = 12);
// Two panels (accumulated residual by point x position; components x position) on a diverging scale
// centred on 0, columns labelled "(t) token".
std::string svg_lens(const LensResult& r, const std::string& title);

}  // namespace findings
