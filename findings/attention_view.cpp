#include "findings/attention_view.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "findings/ascii_heatmap.h"
#include "findings/utf8_label.h"
#include "io/append_format.h"

namespace findings {

namespace {

nlohmann::json maps_to_json(const Probe& probe) {
  nlohmann::json att = nlohmann::json::array();
  for (const HeadMap& m : probe.maps)
    att.push_back({{"layer", m.layer}, {"head", m.head}, {"weights", m.weights}});
  return att;
}

std::string fmt3(double v) {
  std::string s;
  io::append_format(s, "%.3f", v);
  return s;
}

float max_abs(const AttentionWeights& w) {
  float m = 0;
  for (const auto& row : w)
    for (float v : row) m = std::max(m, std::fabs(v));
  return m;
}

// A rendered panel without its row labels (drawn once, at the left) and without its legend lines.
// The renderers put a one-column label and a space before each row when the labels are empty.
std::vector<std::string> bare_panel(const std::string& title, const std::string& text, int rows) {
  std::vector<std::string> lines{title};
  for (const std::string& line : text_lines(text, rows + 1))
    lines.push_back(line.size() >= 2 ? line.substr(2) : "");
  return lines;
}

}  // namespace

nlohmann::json probe_to_json(const Probe& probe) {
  return {{"ids", probe.ids}, {"tokens", probe.tokens}, {"attention", maps_to_json(probe)}};
}

nlohmann::json forward_to_json(const ForwardResult& r) {
  nlohmann::json j = probe_to_json(r.probe);
  j["logits"] = r.logits;
  j["predictions"] = r.predictions;
  return j;
}

std::string forward_table(const ForwardResult& r) {
  std::string out = "\n  pos  token  ->  predicted next\n";
  for (size_t t = 0; t < r.predicted.size(); ++t)
    io::append_format(out, "  %3d  %-5s  ->  %s\n", static_cast<int>(t), r.probe.tokens[t].c_str(),
                      r.predicted[t].c_str());
  AsciiOptions opts;
  opts.mark_future = true;
  return out + "\nattention (rows: query tokens, columns: key tokens)\n" + ascii_grid(r.probe, opts);
}

nlohmann::json attend_to_json(const AttendResult& r) {
  return probe_to_json(r.probe);
}

std::string attend_table(const AttendResult& r) {
  const Probe& probe = r.probe;
  AsciiOptions opts;
  opts.mark_future = true;  // causal model: keys after the query are masked, not merely unattended
  if (r.every_head)
    return "\nevery head (rows: where each query token looks, columns: key tokens)\n" +
           ascii_grid(probe, opts);
  std::string out;
  for (const HeadMap& m : probe.maps) {
    io::append_format(out, "\nlayer %d head %d (rows: where each query token looks, columns: key tokens)\n",
                      m.layer, m.head);
    out += ascii_heatmap(m.weights, probe.tokens, probe.tokens, opts);
    out += "\nweights (row i: how query i splits its attention; rows sum to 1)\n";
    out += weight_table(m.weights, probe.tokens, probe.tokens);
  }
  return out;
}

double total_variation(const AttentionWeights& a, const AttentionWeights& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double row = 0;
    for (size_t j = 0; j < a[i].size(); ++j) row += std::fabs(static_cast<double>(a[i][j]) - b[i][j]);
    sum += 0.5 * row;
  }
  return a.empty() ? 0.0 : sum / static_cast<double>(a.size());
}

nlohmann::json compare_to_json(const CompareResult& r) {
  nlohmann::json heads = nlohmann::json::array();
  for (const HeadChange& h : r.heads)
    heads.push_back({{"layer", h.layer}, {"head", h.head}, {"total_variation", h.total_variation}});
  return {{"a", probe_to_json(r.a)}, {"b", probe_to_json(r.b)}, {"heads", heads}};
}

std::string compare_table(const CompareResult& r) {
  const Probe &pa = r.a, &pb = r.b;
  const int T = static_cast<int>(pa.tokens.size());
  // Row labels once at the left (after each panel's title and column-label lines): the token where A and B
  // agree, "a/b" where they differ. A - B's columns show the agreed token, or '*' where they differ.
  std::vector<std::string> labels{"", ""}, diff_cols;
  int label_w = 1;
  for (int i = 0; i < T; ++i) {
    const bool same = pa.tokens[i] == pb.tokens[i];
    labels.push_back(same ? pa.tokens[i] : pa.tokens[i] + "/" + pb.tokens[i]);
    diff_cols.push_back(same ? pa.tokens[i] : "*");
    label_w = std::max(label_w, display_width(labels.back()));
  }
  for (std::string& l : labels) l.insert(0, static_cast<size_t>(label_w - display_width(l)), ' ');

  // Cells: A and B one to three columns, A - B twice that (it needs a sign), all within ~78 columns.
  const int budget = 78 - label_w - 6;
  const int cell = std::clamp(budget / std::max(1, 4 * T), 1, 3);
  AsciiOptions ab, diff;
  ab.mark_future = diff.mark_future = true;
  ab.width = 2 + T * cell;
  diff.width = 2 + T * 2 * cell;
  const std::vector<std::string> none(static_cast<size_t>(T), "");

  std::string out;
  for (size_t k = 0; k < pa.maps.size(); ++k) {
    const HeadMap& ma = pa.maps[k];
    const HeadMap& mb = pb.maps[k];
    float dmax = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) dmax = std::max(dmax, std::fabs(ma.weights[i][j] - mb.weights[i][j]));
    out +=
        "\n" + head_name(ma.layer, ma.head) + "   total variation " + fmt3(r.heads[k].total_variation) + "\n";
    out += side_by_side(
        {labels,
         bare_panel("A max " + fmt3(max_abs(ma.weights)), ascii_heatmap(ma.weights, none, pa.tokens, ab), T),
         bare_panel("B max " + fmt3(max_abs(mb.weights)), ascii_heatmap(mb.weights, none, pb.tokens, ab), T),
         bare_panel("A - B max " + fmt3(dmax),
                    ascii_difference(ma.weights, mb.weights, none, diff_cols, diff), T)},
        2);
  }
  io::append_format(
      out,
      "\nlevels of each panel's max: ' '<20%% %s<40%% %s<60%% %s<80%% %s<=100%%; · masked (future "
      "key)\n",
      heat_glyph(1), heat_glyph(2), heat_glyph(3), heat_glyph(4));
  io::append_format(out,
                    "A - B: +%s where A looks more, -%s where B looks more; rows and columns marked a/b or * "
                    "differ\n",
                    heat_glyph(4), heat_glyph(4));

  std::vector<HeadChange> changes = r.heads;
  std::stable_sort(changes.begin(), changes.end(), [](const HeadChange& x, const HeadChange& y) {
    return x.total_variation > y.total_variation;
  });
  out += "\ntotal variation between A's and B's maps (0: same map, 1: disjoint), most changed first\n";
  for (const HeadChange& c : changes) {
    std::string bar;
    for (int k = 0; k < static_cast<int>(std::lround(c.total_variation * 40)); ++k) bar += heat_glyph(4);
    io::append_format(out, "  %-6s %s  %s\n", head_name(c.layer, c.head).c_str(),
                      fmt3(c.total_variation).c_str(), bar.c_str());
  }
  return out;
}

std::vector<std::string> text_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line) && (n < 0 || static_cast<int>(lines.size()) < n);)
    lines.push_back(line);
  return lines;
}

std::string side_by_side(const std::vector<std::vector<std::string>>& panels, int gap) {
  size_t rows = 0;
  std::vector<int> widths;
  for (const auto& p : panels) {
    rows = std::max(rows, p.size());
    int w = 0;
    for (const std::string& line : p) w = std::max(w, display_width(line));
    widths.push_back(w);
  }
  std::string out;
  for (size_t r = 0; r < rows; ++r) {
    std::string line;
    for (size_t k = 0; k < panels.size(); ++k) {
      const std::string cell = r < panels[k].size() ? panels[k][r] : "";
      line += cell;
      if (k + 1 < panels.size()) line.append(static_cast<size_t>(widths[k] - display_width(cell) + gap), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

}  // namespace findings
