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

}  // namespace

json patching_to_json(const PatchingResult& r, bool with_labels) {
  json resid = json::array(), head_z = json::array(), head_all = json::array();
  for (const ResidPatch& p : r.resid_pre)
    resid.push_back({{"layer", p.layer}, {"position", p.position}, {"recovered", p.recovered}});
  for (const HeadPositionPatch& p : r.head_z)
    head_z.push_back(
        {{"layer", p.layer}, {"head", p.head}, {"position", p.position}, {"recovered", p.recovered}});
  for (const HeadPatch& p : r.head_all)
    head_all.push_back({{"layer", p.layer}, {"head", p.head}, {"recovered", p.recovered}});
  json j = {{"answer", r.answer}, {"wrong", r.wrong}, {"clean", r.clean},    {"corrupt", r.corrupt},
            {"resid_pre", resid}, {"head_z", head_z}, {"head_all", head_all}};
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
  const json& resid = array_at(j, "resid_pre", source);
  for (size_t i = 0; i < resid.size(); ++i) {
    const std::string ptr = "/resid_pre/" + std::to_string(i);
    r.resid_pre.push_back({int_at(resid[i], "layer", source, ptr), int_at(resid[i], "position", source, ptr),
                           number_at(resid[i], "recovered", source, ptr)});
  }
  const json& hz = array_at(j, "head_z", source);
  for (size_t i = 0; i < hz.size(); ++i) {
    const std::string ptr = "/head_z/" + std::to_string(i);
    r.head_z.push_back({int_at(hz[i], "layer", source, ptr), int_at(hz[i], "head", source, ptr),
                        int_at(hz[i], "position", source, ptr), number_at(hz[i], "recovered", source, ptr)});
  }
  const json& ha = array_at(j, "head_all", source);
  for (size_t i = 0; i < ha.size(); ++i) {
    const std::string ptr = "/head_all/" + std::to_string(i);
    r.head_all.push_back({int_at(ha[i], "layer", source, ptr), int_at(ha[i], "head", source, ptr),
                          number_at(ha[i], "recovered", source, ptr)});
  }
  for (const ResidPatch& p : r.resid_pre)
    if (p.layer < 0 || p.position < 0)
      io::json_error(source, "/resid_pre", "expected layers and positions >= 0");
  for (const HeadPositionPatch& p : r.head_z)
    if (p.layer < 0 || p.head < 0 || p.position < 0)
      io::json_error(source, "/head_z", "expected layers, heads and positions >= 0");
  r.clean_tokens = strings_at(j, "clean_tokens");
  r.corrupt_tokens = strings_at(j, "corrupt_tokens");
  if (j.contains("answer_token") && j["answer_token"].is_string()) r.answer_token = j["answer_token"];
  if (j.contains("wrong_token") && j["wrong_token"].is_string()) r.wrong_token = j["wrong_token"];
  return r;
}

void write_patching(const std::string& path, const PatchingResult& r) {
  const std::string text = patching_to_json(r, true).dump(1) + "\n";
  // Read back first: a value its reader refuses (a NaN written as null) is an error, not a file.
  patching_from_json(io::parse_json(text, path), path + " (not written)");
  io::write_text_file_atomically(path, text);
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
