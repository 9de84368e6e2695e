// The logit lens and residual decomposition: JSON, terminal table and SVG (see lens_view.h).
#include "findings/lens_view.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "findings/svg_matrix.h"
#include "io/append_format.h"
#include "io/atomic_file.h"
#include "io/json_error.h"

namespace findings {
namespace {

using nlohmann::json;

const json& field(const json& j, const std::string& key, const std::string& source, const std::string& ptr,
                  bool (json::*is)() const noexcept, const char* what) {
  if (!j.is_object() || !j.contains(key) || !(j.at(key).*is)()) io::json_error(source, ptr + "/" + key, what);
  return j.at(key);
}

// Row names in first-seen order, and value[row][position].
struct Grid {
  std::vector<std::string> rows;
  std::vector<std::vector<double>> values;
};

template <typename Entry, typename Name>
Grid grid_of(const std::vector<Entry>& entries, int T, Name name) {
  Grid g;
  std::map<std::string, size_t> index;
  for (const Entry& e : entries) {
    const std::string n = name(e);
    auto it = index.find(n);
    if (it == index.end()) {
      it = index.emplace(n, g.rows.size()).first;
      g.rows.push_back(n);
      g.values.push_back(std::vector<double>(static_cast<size_t>(T), NAN));
    }
    if (e.position >= 0 && e.position < T) g.values[it->second][static_cast<size_t>(e.position)] = e.value;
  }
  return g;
}

int positions_of(const LensResult& r) {
  int T = static_cast<int>(r.positions.size());
  for (const auto& e : r.accumulated) T = std::max(T, e.position + 1);
  for (const auto& e : r.components) T = std::max(T, e.position + 1);
  return std::max(T, static_cast<int>(r.actual.size()));
}

std::string metric_text(const LensResult& r) {
  const std::string a = r.answer_token.empty() ? "id " + std::to_string(r.answer) : r.answer_token;
  if (r.wrong < 0) return "logit[" + a + "] - mean logit";
  const std::string w = r.wrong_token.empty() ? "id " + std::to_string(r.wrong) : r.wrong_token;
  return "logit[" + a + "] - logit[" + w + "]";
}

}  // namespace

json lens_to_json(const LensResult& r, bool with_labels) {
  json acc = json::array(), comp = json::array(), actual = json::array();
  for (const auto& e : r.accumulated)
    acc.push_back({{"point", e.point}, {"position", e.position}, {"value", e.value}});
  for (const auto& e : r.components)
    comp.push_back({{"name", e.name}, {"position", e.position}, {"value", e.value}});
  for (size_t t = 0; t < r.actual.size(); ++t) actual.push_back({{"position", t}, {"value", r.actual[t]}});
  json j = {{"answer", r.answer},       {"wrong", r.wrong < 0 ? json(nullptr) : json(r.wrong)},
            {"positions", r.positions}, {"accumulated", acc},
            {"components", comp},       {"actual", actual}};
  if (with_labels) {
    j["answer_token"] = r.answer_token;
    j["wrong_token"] = r.wrong_token;
  }
  return j;
}

LensResult lens_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "", "expected an object");
  LensResult r;
  r.answer = field(j, "answer", source, "", &json::is_number_integer, "expected an integer").get<int>();
  if (!j.contains("wrong") || !(j["wrong"].is_null() || j["wrong"].is_number_integer()))
    io::json_error(source, "/wrong", "expected an integer or null");
  r.wrong = j["wrong"].is_null() ? -1 : j["wrong"].get<int>();
  for (const json& s : field(j, "positions", source, "", &json::is_array, "expected an array")) {
    if (!s.is_string()) io::json_error(source, "/positions", "expected token names (strings)");
    r.positions.push_back(s.get<std::string>());
  }
  auto entries = [&](const char* key, const char* name_key, auto push) {
    const json& a = field(j, key, source, "", &json::is_array, "expected an array");
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string ptr = "/" + std::string(key) + "/" + std::to_string(i);
      const std::string name =
          name_key
              ? field(a[i], name_key, source, ptr, &json::is_string, "expected a string").get<std::string>()
              : "";
      const int position =
          field(a[i], "position", source, ptr, &json::is_number_integer, "expected an integer").get<int>();
      if (position < 0) io::json_error(source, ptr + "/position", "expected a position >= 0");
      push(name, position,
           field(a[i], "value", source, ptr, &json::is_number, "expected a number").get<double>());
    }
  };
  entries("accumulated", "point", [&](const std::string& n, int p, double v) {
    r.accumulated.push_back({n, p, v});
  });
  entries("components", "name", [&](const std::string& n, int p, double v) {
    r.components.push_back({n, p, v});
  });
  entries("actual", nullptr, [&](const std::string&, int p, double v) {
    if (static_cast<size_t>(p) >= r.actual.size()) r.actual.resize(static_cast<size_t>(p) + 1, NAN);
    r.actual[static_cast<size_t>(p)] = v;
  });
  if (j.contains("answer_token") && j["answer_token"].is_string()) r.answer_token = j["answer_token"];
  if (j.contains("wrong_token") && j["wrong_token"].is_string()) r.wrong_token = j["wrong_token"];
  return r;
}

std::vector<LensResult> read_lenses(const std::string& dir, std::vector<std::string>* names) {
  std::vector<std::string> paths;
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<LensResult> out;
  for (const std::string& p : paths) {
    out.push_back(lens_from_json(io::parse_json(io::read_text_file(p), p), p));
    if (names) names->push_back(std::filesystem::path(p).stem().string());
  }
  return out;
}

std::string lens_table(const LensResult& r, int max_columns) {
  const int T = positions_of(r);
  const int first = std::max(0, T - std::max(1, max_columns));
  const Grid acc = grid_of(r.accumulated, T, [](const LensPointValue& e) { return e.point; });
  const Grid comp = grid_of(r.components, T, [](const LensComponentValue& e) { return e.name; });
  size_t label_w = 6;
  for (const auto& n : acc.rows) label_w = std::max(label_w, n.size());
  for (const auto& n : comp.rows) label_w = std::max(label_w, n.size());
  label_w += 2;
  std::string out;
  io::append_format(
      out, "metric: %s at each position%s\n", metric_text(r).c_str(),
      first > 0 ? (" (the last " + std::to_string(T - first) + " positions shown)").c_str() : "");
  auto header = [&](const std::string& title) {
    std::string line = title;
    line.resize(label_w, ' ');
    for (int t = first; t < T; ++t) {
      std::string tok = t < static_cast<int>(r.positions.size()) ? r.positions[t] : std::to_string(t);
      if (tok.size() > 6) tok = tok.substr(0, 6);
      io::append_format(line, " %7s", tok.c_str());
    }
    out += line + "\n";
  };
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    std::string line = name;
    line.resize(label_w, ' ');
    for (int t = first; t < T; ++t) io::append_format(line, " %7.2f", v[static_cast<size_t>(t)]);
    out += line + "\n";
  };
  header("accumulated");
  for (size_t i = 0; i < acc.rows.size(); ++i) row(acc.rows[i], acc.values[i]);
  std::vector<double> actual(static_cast<size_t>(T), NAN);
  for (size_t t = 0; t < r.actual.size(); ++t) actual[t] = r.actual[t];
  row("actual", actual);
  out += "\n";
  header("components");
  for (size_t i = 0; i < comp.rows.size(); ++i) row(comp.rows[i], comp.values[i]);
  std::vector<double> total(static_cast<size_t>(T), 0.0);
  for (const auto& v : comp.values)
    for (int t = 0; t < T; ++t) total[t] += v[t];
  row("sum", total);
  // The largest components at the last position, by |value|.
  std::vector<std::pair<double, std::string>> last;
  for (size_t i = 0; i < comp.rows.size(); ++i)
    if (std::isfinite(comp.values[i][T - 1])) last.push_back({comp.values[i][T - 1], comp.rows[i]});
  std::sort(last.begin(), last.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  out += "\nlargest positive components at the last position:";
  for (size_t i = 0; i < std::min<size_t>(3, last.size()); ++i)
    io::append_format(out, " %s %.3f%s", last[i].second.c_str(), last[i].first, i + 1 < 3 ? "," : "");
  out += "\n";
  return out;
}

std::string svg_lens(const LensResult& r, const std::string& title) {
  const int T = positions_of(r);
  std::vector<std::string> cols;
  for (int t = 0; t < T; ++t)
    cols.push_back("(" + std::to_string(t) + ") " +
                   (t < static_cast<int>(r.positions.size()) ? r.positions[t] : std::string()));
  const Grid acc = grid_of(r.accumulated, T, [](const LensPointValue& e) { return e.point; });
  const Grid comp = grid_of(r.components, T, [](const LensComponentValue& e) { return e.name; });
  MatrixPanel a{"accumulated residual stream through ln_f and the unembedding", acc.rows, cols, acc.values};
  MatrixPanel c{"decomposition: each component's direct contribution", comp.rows, cols, comp.values};
  MatrixSvgOptions opts;
  opts.title = title;
  opts.note = "metric: " + metric_text(r) + "; ln_f applied with the actual forward's scale at each position";
  opts.legend = "contribution to the metric (red: towards the answer, blue: against it)";
  opts.diverging = true;
  opts.value_format = "%.3f";
  return svg_matrices({a, c}, opts);
}

}  // namespace findings
