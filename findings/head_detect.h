// Head detectors from the user, as TransformerLens's detect_head defines them: a detection pattern D
// (T x S, query i, key j) is built from each input's tokens by a rule, or given as a matrix, and each
// head's attention pattern A on that input is scored against it:
//   mul: sum(A * D) / sum(A)       the share of the head's attention that lands where D says (0..1)
//   abs: 1 - mean(|A - D|) * T     1 minus the mean over query rows of the row's L1 distance to D
// (TransformerLens also rounds abs to 3 decimals; this does not). A head's score is the mean over the inputs.
// Rules (D is lower-triangular: a query never sees later keys):
//   previous   D[i][i-1] = 1
//   duplicate  D[i][j] = 1 for j < i with token j == token i
//   induction  D[i][j] = 1 for 1 <= j <= i with token j-1 == token i and j-1 < i (after an earlier copy)
//   first      D[i][0] = 1
//   offset k   D[i][i-k] = 1 where i-k >= 0 (k = 1 is previous)
// A rule file (`attograd detect --pattern FILE.json`) holds {"pattern": [[...] x T]} (a T x T matrix),
// {"offset": k}, or {"rule": "previous" | "duplicate" | "induction" | "first"}.
// Not for computing attention (analysis/capture.h does): plain data in, numbers out.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "findings/attention_maps.h"

namespace findings {

struct DetectionRule {
  std::string rule;                         // previous, duplicate, induction, first, offset, matrix
  int offset = 1;                           // for "offset"
  std::vector<std::vector<double>> matrix;  // for "matrix": T x T
  std::string describe() const;             // "induction", "offset 2", "matrix 16 x 16 from FILE"
  std::string source;                       // the file it came from, if any
};

// A named rule ("previous", ...), or a rule file read and checked; errors are one line (std::runtime_error
// naming the file and the field, or std::invalid_argument for an unknown name).
DetectionRule detection_rule(const std::string& name_or_file);

// D for one input's token ids. Throws std::invalid_argument when a matrix rule is not T x T.
std::vector<std::vector<double>> detection_pattern(const DetectionRule& rule, const std::vector<int>& ids);

enum class DetectMode { mul, abs };
double detection_score(const AttentionWeights& a, const std::vector<std::vector<double>>& d, DetectMode mode);

struct HeadDetection {
  int layer = 0, head = 0;
  double score = 0;  // mean over the inputs
};
// Every head of the probes' maps, by (layer, head).
std::vector<HeadDetection> detect_heads(const std::vector<Probe>& probes, const DetectionRule& rule,
                                        DetectMode mode);

// What `attograd detect` reports, and its JSON (`detect --json`, Run.detect):
//   {"pattern": rule.describe(), "mode": "mul" or "abs", "sequences": N, "heads": [{layer, head, score}]}
struct DetectResult {
  std::string pattern;  // the rule as describe() says it
  std::string mode = "mul";
  int sequences = 0;                 // the inputs the scores are the mean over
  std::vector<HeadDetection> heads;  // by (layer, head)
};
nlohmann::json detect_to_json(const DetectResult& r);
// The heads by score, highest first.
std::string detect_table(const DetectResult& r);

}  // namespace findings
