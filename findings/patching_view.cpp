// Activation patching results: JSON, terminal heatmap and SVG (see patching_view.h).
#include "findings/patching_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>

#include "findings/ascii_heatmap.h"
#include "findings/svg_matrix.h"
#include "io/append_format.h"
#include "io/atomic_file.h"
#include "io/json_error.h"

namespace findings {
namespace {

using nlohmann::json;

int int_at(const json& j, const std::string& key, const std::string& source, const std::string& ptr) {
  if (!j.contains(key) || !j.at(key).is_number_integer())
    io::json_error(source, ptr + "/" + key, "expected an integer");
  return j.at(key).get<int>();
}

double number_at(const json& j, const std::string& key, const std::string& source, const std::string& ptr) {
  if (!j.contains(key) || !j.at(key).is_number())
    io::json_error(source, ptr + "/" + key, "expected a number");
  return j.at(key).get<double>();
}

const json& array_at(const json& j, const std::string& key, const std::string& source) {
  if (!j.contains(key) || !j.at(key).is_array()) io::json_error(source, "/" + key, "expected an array");
  return j.at(key);
}

std::vector<std::string> strings_at(const json& j, const std::string& key) {
  std::vector<std::string> out;
  if (j.contains(key) && j.at(key).is_array())
    for (const json& s : j.at(key))
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

// Column labels: the clean token, "clean/corrupt" where the inputs differ, or the position.
std::vector<std::string> position_labels(const PatchingResult& r, int T) {
  std::vector<std::string> out;
  for (int t = 0; t < T; ++t) {
    std::string s = std::to_string(t);
    if (t < static_cast<int>(r.clean_tokens.size())) {
      s = r.clean_tokens[t];
      if (t < static_cast<int>(r.corrupt_tokens.size()) && r.corrupt_tokens[t] != s)
        s += "/" + r.corrupt_tokens[t];
    }
    out.push_back(s);
  }
  return out;
}

struct Shape {
  int layers = 0, heads = 0, T = 0;  // layers: model layers (resid rows are layers + 1)
};

Shape shape_of(const PatchingResult& r) {
  Shape s;
  for (const ResidPatch& p : r.resid_pre)
    s.layers = std::max(s.layers, p.layer), s.T = std::max(s.T, p.position + 1);
  for (const HeadPositionPatch& p : r.head_z)
    s.heads = std::max(s.heads, p.head + 1), s.T = std::max(s.T, p.position + 1);
  return s;  // resid_pre's largest layer is the resid_post row, i.e. the number of model layers
}

// A signed cell of two columns: '-' for negative, then the level glyph of |v| on the fixed scale 0..1.
std::string signed_cell(double v) {
  if (!std::isfinite(v)) return " ?";
  const int level = heat_level(static_cast<float>(std::min(std::fabs(v), 1.0)), 1.0f);
  return std::string(v < 0 && level > 0 ? "-" : " ") + heat_glyph(level);
}

json head_positions_json(const std::vector<HeadPositionPatch>& list) {
  json out = json::array();
  for (const HeadPositionPatch& p : list)
    out.push_back(
        {{"layer", p.layer}, {"head", p.head}, {"position", p.position}, {"recovered", p.recovered}});
  return out;
}
json heads_json(const std::vector<HeadPatch>& list) {
  json out = json::array();
  for (const HeadPatch& p : list)
    out.push_back({{"layer", p.layer}, {"head", p.head}, {"recovered", p.recovered}});
  return out;
}

// resid_pre, head_z and head_all always; the other kinds when measured.
json effects_json(const PatchEffects& e) {
  json resid = json::array();
  for (const ResidPatch& p : e.resid_pre)
    resid.push_back({{"layer", p.layer}, {"position", p.position}, {"recovered", p.recovered}});
  json j = {
      {"resid_pre", resid}, {"head_z", head_positions_json(e.head_z)}, {"head_all", heads_json(e.head_all)}};
  if (!e.head_q.empty()) j["head_q"] = head_positions_json(e.head_q);
  if (!e.head_k.empty()) j["head_k"] = head_positions_json(e.head_k);
  if (!e.head_v.empty()) j["head_v"] = head_positions_json(e.head_v);
  if (!e.head_pattern.empty()) j["head_pattern"] = heads_json(e.head_pattern);
  return j;
}

// The lists of `e` from j's keys (resid_pre, head_z, head_all required; the others optional).
void effects_from_json(const json& j, const std::string& source, const std::string& prefix, PatchEffects& e) {
  const json& resid = array_at(j, "resid_pre", source);
  for (size_t i = 0; i < resid.size(); ++i) {
    const std::string ptr = prefix + "/resid_pre/" + std::to_string(i);
    e.resid_pre.push_back({int_at(resid[i], "layer", source, ptr), int_at(resid[i], "position", source, ptr),
                           number_at(resid[i], "recovered", source, ptr)});
  }
  auto head_positions = [&](const char* key, std::vector<HeadPositionPatch>& out, bool required) {
    if (!required && !j.contains(key)) return;
    const json& a = array_at(j, key, source);
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string ptr = prefix + "/" + key + "/" + std::to_string(i);
      out.push_back({int_at(a[i], "layer", source, ptr), int_at(a[i], "head", source, ptr),
                     int_at(a[i], "position", source, ptr), number_at(a[i], "recovered", source, ptr)});
      if (out.back().layer < 0 || out.back().head < 0 || out.back().position < 0)
        io::json_error(source, prefix + "/" + key, "expected layers, heads and positions >= 0");
    }
  };
  auto heads = [&](const char* key, std::vector<HeadPatch>& out, bool required) {
    if (!required && !j.contains(key)) return;
    const json& a = array_at(j, key, source);
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string ptr = prefix + "/" + key + "/" + std::to_string(i);
      out.push_back({int_at(a[i], "layer", source, ptr), int_at(a[i], "head", source, ptr),
                     number_at(a[i], "recovered", source, ptr)});
    }
  };
  head_positions("head_z", e.head_z, true);
  heads("head_all", e.head_all, true);
  head_positions("head_q", e.head_q, false);
  head_positions("head_k", e.head_k, false);
  head_positions("head_v", e.head_v, false);
  heads("head_pattern", e.head_pattern, false);
  for (const ResidPatch& p : e.resid_pre)
    if (p.layer < 0 || p.position < 0)
      io::json_error(source, prefix + "/resid_pre", "expected layers and positions >= 0");
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return NAN;
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += a[i] / n, mb += b[i] / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i)
    sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

}  // namespace

const std::vector<std::string>& patch_kinds() {
  static const std::vector<std::string> kinds = {"resid_pre", "head_z", "head_all",    "head_q",
                                                 "head_k",    "head_v", "head_pattern"};
  return kinds;
}

std::vector<double> patch_values(const PatchEffects& e, const std::string& kind) {
  std::vector<double> out;
  auto heads = [&](const std::vector<HeadPositionPatch>& l) {
    for (const auto& p : l) out.push_back(p.recovered);
  };
  auto whole = [&](const std::vector<HeadPatch>& l) {
    for (const auto& p : l) out.push_back(p.recovered);
  };
  if (kind == "resid_pre")
    for (const auto& p : e.resid_pre) out.push_back(p.recovered);
  if (kind == "head_z") heads(e.head_z);
  if (kind == "head_all") whole(e.head_all);
  if (kind == "head_q") heads(e.head_q);
  if (kind == "head_k") heads(e.head_k);
  if (kind == "head_v") heads(e.head_v);
  if (kind == "head_pattern") whole(e.head_pattern);
  return out;
}

std::vector<std::pair<std::string, double>> attribution_correlations(const PatchingResult& r) {
  std::vector<std::pair<std::string, double>> out;
  if (!r.attribution) return out;
  for (const std::string& kind : patch_kinds()) {
    const std::vector<double> real = patch_values(r, kind), estimate = patch_values(*r.attribution, kind);
    if (real.empty() || real.size() != estimate.size()) continue;
    out.push_back({kind, pearson(real, estimate)});
  }
  return out;
}

std::string attribution_table(const PatchingResult& r) {
  std::string out;
  if (!r.attribution) return out;
  out +=
      "\nattribution patching: (clean - corrupt) . d metric / d activation on the corrupt run, over (clean - "
      "corrupt)\n  kind          entries  Pearson r   largest real patch         real  estimate\n";
  for (const auto& [kind, corr] : attribution_correlations(r)) {
    const std::vector<double> real = patch_values(r, kind), estimate = patch_values(*r.attribution, kind);
    size_t arg = 0;
    for (size_t i = 1; i < real.size(); ++i)
      if (real[i] > real[arg]) arg = i;
    std::string where;
    if (kind == "resid_pre") {
      const int layer = r.resid_pre[arg].layer, layers = shape_of(r).layers;
      where = (layer < layers ? "resid_pre " + std::to_string(layer)
                              : "resid_post " + std::to_string(layer - 1)) +
              " pos " + std::to_string(r.resid_pre[arg].position);
    } else if (kind == "head_all" || kind == "head_pattern") {
      const HeadPatch& p = kind == "head_all" ? r.head_all[arg] : r.head_pattern[arg];
      where = "L" + std::to_string(p.layer) + " H" + std::to_string(p.head);
    } else {
      const std::vector<HeadPositionPatch>& l = kind == "head_z"   ? r.head_z
                                                : kind == "head_q" ? r.head_q
                                                : kind == "head_k" ? r.head_k
                                                                   : r.head_v;
      where = "L" + std::to_string(l[arg].layer) + " H" + std::to_string(l[arg].head) + " pos " +
              std::to_string(l[arg].position);
    }
    io::append_format(out, "  %-12s %8zu  %9.3f   %-22s %7.3f  %8.3f\n", kind.c_str(), real.size(), corr,
                      where.c_str(), real[arg], estimate[arg]);
  }
  return out;
}

json patching_to_json(const PatchingResult& r, bool with_labels) {
  json j = {{"answer", r.answer}, {"wrong", r.wrong}, {"clean", r.clean}, {"corrupt", r.corrupt}};
  j.update(effects_json(r));
  if (r.attribution) j["attribution"] = effects_json(*r.attribution);
  if (with_labels) {
    j["clean_tokens"] = r.clean_tokens;
    j["corrupt_tokens"] = r.corrupt_tokens;
    j["answer_token"] = r.answer_token;
    j["wrong_token"] = r.wrong_token;
  }
  return j;
}

PatchingResult patching_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "", "expected an object");
  PatchingResult r;
  r.answer = int_at(j, "answer", source, "");
  r.wrong = int_at(j, "wrong", source, "");
  r.clean = number_at(j, "clean", source, "");
  r.corrupt = number_at(j, "corrupt", source, "");
  effects_from_json(j, source, "", r);
  if (j.contains("attribution")) {
    if (!j["attribution"].is_object()) io::json_error(source, "/attribution", "expected an object");
    r.attribution.emplace();
    effects_from_json(j["attribution"], source, "/attribution", *r.attribution);
  }
  r.clean_tokens = strings_at(j, "clean_tokens");
  r.corrupt_tokens = strings_at(j, "corrupt_tokens");
  if (j.contains("answer_token") && j["answer_token"].is_string()) r.answer_token = j["answer_token"];
  if (j.contains("wrong_token") && j["wrong_token"].is_string()) r.wrong_token = j["wrong_token"];
  return r;
}

std::string patching_file_text(const PatchingResult& r, const std::string& path) {
  const std::string text = patching_to_json(r, true).dump(1) + "\n";
  patching_from_json(io::parse_json(text, path), path + " (not written)");
  return text;
}

PatchingResult read_patching(const std::string& path) {
  return patching_from_json(io::parse_json(io::read_text_file(path), path), path);
}

std::vector<PatchingResult> read_patchings(const std::string& dir, std::vector<std::string>* names) {
  std::vector<std::string> paths;
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<PatchingResult> out;
  for (const std::string& p : paths) {
    out.push_back(read_patching(p));
    if (names) names->push_back(std::filesystem::path(p).stem().string());
  }
  return out;
}

std::string patching_table(const PatchingResult& r, int width) {
  const Shape s = shape_of(r);
  const std::vector<std::string> labels = position_labels(r, s.T);
  std::string out;
  io::append_format(out,
                    "metric: logit[%s] - logit[%s] at the last position (ids %d, %d)\n"
                    "clean %.4f, corrupt %.4f; recovered = (patched - corrupt) / (clean - corrupt)\n",
                    r.answer_token.c_str(), r.wrong_token.c_str(), r.answer, r.wrong, r.clean, r.corrupt);
  std::map<std::pair<int, int>, double> resid, head_all;
  std::map<std::tuple<int, int, int>, double> hz;
  for (const ResidPatch& p : r.resid_pre) resid[{p.layer, p.position}] = p.recovered;
  for (const HeadPositionPatch& p : r.head_z) hz[{p.layer, p.head, p.position}] = p.recovered;
  for (const HeadPatch& p : r.head_all) head_all[{p.layer, p.head}] = p.recovered;

  // Cells are two columns; the row label column is 12 wide; positions wrap in blocks that fit `width`.
  const int label_w = 12, per_block = std::max(4, (width - label_w - 14) / 2);
  auto grid = [&](const std::string& title, const std::vector<std::string>& row_names,
                  const std::function<double(size_t, int)>& value,
                  const std::function<std::string(size_t)>& extra) {
    out += "\n" + title + "\n";
    for (int start = 0; start < s.T; start += per_block) {
      const int end = std::min(s.T, start + per_block);
      // Column header: each position over its two-column cell; tens on a line of their own from 10 on.
      if (end > 10) {
        std::string tens(label_w, ' ');
        for (int t = start; t < end; ++t) tens += t >= 10 ? " " + std::to_string(t / 10 % 10) : "  ";
        out += tens + "\n";
      }
      std::string head(label_w, ' ');
      for (int t = start; t < end; ++t) head += " " + std::to_string(t % 10);
      out += head + "\n";
      for (size_t row = 0; row < row_names.size(); ++row) {
        std::string line = row_names[row];
        line.resize(label_w, ' ');
        for (int t = start; t < end; ++t) line += signed_cell(value(row, t));
        if (end == s.T) line += "  " + extra(row);
        out += line + "\n";
      }
    }
  };
  std::vector<std::string> resid_rows;
  for (int l = 0; l <= s.layers; ++l)
    resid_rows.push_back(l < s.layers ? "resid_pre " + std::to_string(l)
                                      : "resid_post " + std::to_string(l - 1));
  auto best = [](const std::function<double(int)>& v, int T) {
    int arg = 0;
    for (int t = 1; t < T; ++t)
      if (v(t) > v(arg)) arg = t;
    std::string o;
    io::append_format(o, "max %.3f at %d", v(arg), arg);
    return o;
  };
  auto rv = [&](int l, int t) {
    auto it = resid.find({l, t});
    return it == resid.end() ? NAN : it->second;
  };
  grid(
      "residual stream (rows: where the clean activation went in; columns: positions)", resid_rows,
      [&](size_t row, int t) { return rv(static_cast<int>(row), t); },
      [&](size_t row) { return best([&](int t) { return rv(static_cast<int>(row), t); }, s.T); });
  std::vector<std::string> head_rows;
  std::vector<std::pair<int, int>> heads;
  for (int l = 0; l < s.layers; ++l)
    for (int h = 0; h < s.heads; ++h)
      head_rows.push_back("L" + std::to_string(l) + " H" + std::to_string(h)), heads.push_back({l, h});
  auto hv = [&](size_t row, int t) {
    auto it = hz.find({heads[row].first, heads[row].second, t});
    return it == hz.end() ? NAN : it->second;
  };
  grid("head outputs z (one head at one position; last column: the head at every position at once)",
       head_rows, hv, [&](size_t row) {
         std::string o = best([&](int t) { return hv(row, t); }, s.T);
         auto it = head_all.find(heads[row]);
         if (it != head_all.end()) io::append_format(o, ", all positions %.3f", it->second);
         return o;
       });
  out +=
      "\nlegend: levels of |recovered| on 0..1 (' ' < 0.2 <= '\u2591' < 0.4 <= '\u2592' < 0.6 <= '\u2593' < "
      "0.8 <= "
      "'\u2588'); '-' marks a negative value\ncolumns:";
  for (int t = 0; t < s.T; ++t) io::append_format(out, " %d=%s", t, labels[t].c_str());
  out += "\n";
  return out;
}

std::string svg_patching(const PatchingResult& r, const std::string& title) {
  const Shape s = shape_of(r);
  const std::vector<std::string> labels = position_labels(r, s.T);
  std::vector<std::string> cols;
  for (int t = 0; t < s.T; ++t) cols.push_back("(" + std::to_string(t) + ") " + labels[t]);
  MatrixPanel resid{"residual stream: patch one layer at one position", {}, cols, {}};
  for (int l = 0; l <= s.layers; ++l) {
    resid.row_labels.push_back(l < s.layers ? "resid_pre " + std::to_string(l)
                                            : "resid_post " + std::to_string(l - 1));
    resid.values.push_back(std::vector<double>(s.T, NAN));
  }
  for (const ResidPatch& p : r.resid_pre)
    if (p.layer <= s.layers && p.position < s.T) resid.values[p.layer][p.position] = p.recovered;
  std::vector<std::string> head_cols = cols;
  head_cols.push_back("all positions");
  MatrixPanel heads{"head output z: patch one head at one position (or at all)", {}, head_cols, {}};
  for (int l = 0; l < s.layers; ++l)
    for (int h = 0; h < s.heads; ++h) {
      heads.row_labels.push_back("L" + std::to_string(l) + " H" + std::to_string(h));
      heads.values.push_back(std::vector<double>(s.T + 1, NAN));
    }
  for (const HeadPositionPatch& p : r.head_z)
    if (p.layer < s.layers && p.head < s.heads && p.position < s.T)
      heads.values[p.layer * s.heads + p.head][p.position] = p.recovered;
  for (const HeadPatch& p : r.head_all)
    if (p.layer < s.layers && p.head < s.heads) heads.values[p.layer * s.heads + p.head][s.T] = p.recovered;
  MatrixSvgOptions opts;
  opts.title = title;
  char note[256];
  std::snprintf(note, sizeof note,
                "recovered = (patched - corrupt) / (clean - corrupt) of logit[%s] - logit[%s]: clean %.3f, "
                "corrupt %.3f",
                r.answer_token.c_str(), r.wrong_token.c_str(), r.clean, r.corrupt);
  opts.note = note;
  opts.legend = "recovered (red: towards clean, blue: away from it)";
  opts.diverging = true;
  double top = 1;
  for (const auto& row : resid.values)
    for (double v : row)
      if (std::isfinite(v)) top = std::max(top, std::fabs(v));
  for (const auto& row : heads.values)
    for (double v : row)
      if (std::isfinite(v)) top = std::max(top, std::fabs(v));
  opts.range = std::ceil(top * 10 - 1e-9) / 10;  // at least 1: "fully recovered" is full colour
  return svg_matrices({resid, heads}, opts);
}

}  // namespace findings
