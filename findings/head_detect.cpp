// Head detectors (see head_detect.h).
#include "findings/head_detect.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include "io/append_format.h"
#include "io/atomic_file.h"
#include "io/field_table.h"
#include "io/json_error.h"
#include "io/json_read.h"

namespace findings {
namespace {

// A T x T pattern of T up to a few hundred tokens is a few MiB of text.
constexpr size_t kMaxPatternFileBytes = size_t(64) << 20;

// A detect pattern file (`attograd detect RUN --pattern FILE.json`): exactly one of its keys.
struct PatternFile {
  std::vector<std::vector<double>> pattern;
  int offset = 0;
  std::optional<std::string> rule;
};

const io::Table<PatternFile>& pattern_file_fields() {
  static const io::Table<PatternFile> fields = {
      {"pattern", &PatternFile::pattern,
       "a T x T array: how much query i (row) is expected to attend to key j (column); the lower triangle "
       "is used",
       io::rule("not empty, T x T")},
      {"offset", &PatternFile::offset, "each query is expected to attend to the token this many back",
       io::at_least(0)},
      {"rule", &PatternFile::rule, "a built-in detector by name",
       io::one_of({"previous", "duplicate", "induction", "first"})},
  };
  return fields;
}

}  // namespace

std::string DetectionRule::describe() const {
  if (rule == "offset") return "offset " + std::to_string(offset);
  if (rule == "matrix")
    return "matrix " + std::to_string(matrix.size()) + " x " +
           std::to_string(matrix.empty() ? 0 : matrix[0].size()) + (source.empty() ? "" : " from " + source);
  return rule;
}

DetectionRule detection_rule(const std::string& name_or_file) {
  for (const char* named : {"previous", "duplicate", "induction", "first"})
    if (name_or_file == named) return {named, 1, {}, ""};
  if (name_or_file.size() < 5 || name_or_file.compare(name_or_file.size() - 5, 5, ".json") != 0)
    throw std::invalid_argument("--pattern " + name_or_file +
                                ": expected previous, duplicate, induction, first or a FILE.json");
  const nlohmann::json j = io::load_json_file(name_or_file, kMaxPatternFileBytes, "a pattern file");
  const PatternFile file = io::read_table(j, pattern_file_fields(), name_or_file);
  if (j.contains("pattern") + j.contains("offset") + j.contains("rule") != 1)
    io::json_error(name_or_file, "", "expected exactly one key of \"pattern\", \"offset\" or \"rule\"");
  DetectionRule r;
  r.source = name_or_file;
  if (j.contains("pattern")) {
    const size_t T = file.pattern.size();
    if (T == 0)
      io::json_error(name_or_file, "/pattern", "expected a T x T array of numbers, got an empty one");
    for (size_t i = 0; i < T; ++i) {
      if (file.pattern[i].size() != T)
        io::json_error(name_or_file, "/pattern/" + std::to_string(i),
                       "expected a row of " + std::to_string(T) + " numbers (T x T)");
    }
    r.rule = "matrix";
    r.matrix = file.pattern;
  } else if (j.contains("offset")) {
    r.rule = "offset";
    r.offset = file.offset;
  } else {
    r.rule = *file.rule;
  }
  return r;
}

std::vector<std::vector<double>> detection_pattern(const DetectionRule& rule, const std::vector<int>& ids) {
  const size_t T = ids.size();
  std::vector<std::vector<double>> d(T, std::vector<double>(T, 0.0));
  if (rule.rule == "matrix") {
    if (rule.matrix.size() != T)
      throw std::invalid_argument("--pattern " + rule.describe() + ": the input has " + std::to_string(T) +
                                  " tokens; the pattern must be T x T");
    for (size_t i = 0; i < T; ++i)
      for (size_t j = 0; j <= i; ++j) d[i][j] = rule.matrix[i][j];  // lower triangle: keys a query can see
    return d;
  }
  for (size_t i = 0; i < T; ++i)
    for (size_t j = 0; j <= i; ++j) {
      bool on = false;
      if (rule.rule == "previous") on = j + 1 == i;
      if (rule.rule == "offset") on = j + static_cast<size_t>(rule.offset) == i;
      if (rule.rule == "first") on = j == 0;
      if (rule.rule == "duplicate") on = j < i && ids[j] == ids[i];
      if (rule.rule == "induction") on = j >= 1 && j - 1 < i && ids[j - 1] == ids[i];
      d[i][j] = on ? 1.0 : 0.0;
    }
  return d;
}

double detection_score(const AttentionWeights& a, const std::vector<std::vector<double>>& d,
                       DetectMode mode) {
  const size_t T = a.size();
  if (d.size() != T) throw std::invalid_argument("detection_score: a T x T pattern for a T x T map");
  if (mode == DetectMode::mul) {
    double hit = 0, total = 0;
    for (size_t i = 0; i < T; ++i)
      for (size_t j = 0; j < T; ++j) hit += double(a[i][j]) * d[i][j], total += double(a[i][j]);
    return total > 0 ? hit / total : 0.0;
  }
  double diff = 0;
  for (size_t i = 0; i < T; ++i)
    for (size_t j = 0; j < T; ++j) diff += std::fabs(double(a[i][j]) - d[i][j]);
  return 1.0 - diff / double(T * T) * double(T);
}

std::vector<HeadDetection> detect_heads(const std::vector<Probe>& probes, const DetectionRule& rule,
                                        DetectMode mode) {
  std::map<std::pair<int, int>, double> sums;
  for (const Probe& p : probes) {
    const std::vector<std::vector<double>> d = detection_pattern(rule, p.ids);
    for (const HeadMap& m : p.maps) sums[{m.layer, m.head}] += detection_score(m.weights, d, mode);
  }
  std::vector<HeadDetection> out;
  for (const auto& [key, sum] : sums) out.push_back({key.first, key.second, sum / double(probes.size())});
  return out;
}

nlohmann::json detect_to_json(const DetectResult& r) {
  nlohmann::json list = nlohmann::json::array();
  for (const HeadDetection& h : r.heads)
    list.push_back({{"layer", h.layer}, {"head", h.head}, {"score", h.score}});
  return {{"pattern", r.pattern}, {"mode", r.mode}, {"sequences", r.sequences}, {"heads", list}};
}

std::string detect_table(const DetectResult& r) {
  std::vector<HeadDetection> sorted = r.heads;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const HeadDetection& x, const HeadDetection& y) { return x.score > y.score; });
  std::string out = "\n  head    score\n";
  for (const HeadDetection& h : sorted)
    io::append_format(out, "  %-6s %6.3f\n", head_name(h.layer, h.head).c_str(), h.score);
  return out;
}

}  // namespace findings
