// Circuit analysis results: JSON, tables and SVGs (see circuits_view.h).
#include "findings/circuits_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "findings/svg_heatmap.h"
#include "findings/svg_matrix.h"
#include "io/append_format.h"
#include "io/atomic_file.h"
#include "io/json_error.h"

namespace findings {
namespace {

using nlohmann::json;

double number_at(const json& j, const std::string& key, const std::string& source, const std::string& ptr) {
  if (!j.contains(key) || !j.at(key).is_number())
    io::json_error(source, ptr + "/" + key, "expected a number");
  return j.at(key).get<double>();
}

int int_at(const json& j, const std::string& key, const std::string& source, const std::string& ptr) {
  if (!j.contains(key) || !j.at(key).is_number_integer() || j.at(key).get<int>() < 0)
    io::json_error(source, ptr + "/" + key, "expected an integer >= 0");
  return j.at(key).get<int>();
}

std::pair<int, int> pair_at(const json& j, const std::string& key, const std::string& source,
                            const std::string& ptr) {
  if (!j.contains(key) || !j.at(key).is_array() || j.at(key).size() != 2 ||
      !j.at(key)[0].is_number_integer() || !j.at(key)[1].is_number_integer())
    io::json_error(source, ptr + "/" + key, "expected [layer, head]");
  return {j.at(key)[0].get<int>(), j.at(key)[1].get<int>()};
}

std::string head_label(int layer, int head) {
  return "L" + std::to_string(layer) + " H" + std::to_string(head);
}

}  // namespace

json circuits_to_json(const CircuitsResult& r, bool with_file_extras) {
  json comp = json::array(), heads = json::array(), components = json::array();
  for (const CompositionScore& c : r.composition)
    comp.push_back({{"from", {c.from_layer, c.from_head}},
                    {"to", {c.to_layer, c.to_head}},
                    {"q", c.q},
                    {"k", c.k},
                    {"v", c.v}});
  for (const HeadCircuit& h : r.heads)
    heads.push_back(
        {{"layer", h.layer},
         {"head", h.head},
         {"copying", h.copying},
         {"prev_token_positional", h.prev_token_positional ? json(*h.prev_token_positional) : json(nullptr)},
         {"dla", h.dla}});
  for (const ComponentDla& c : r.components) components.push_back({{"name", c.name}, {"dla", c.dla}});
  json j = {{"composition", comp},
            {"baseline", r.baseline ? json{{"q", r.baseline->q}, {"k", r.baseline->k}, {"v", r.baseline->v}}
                                    : json(nullptr)},
            {"heads", heads},
            {"components", components}};
  if (with_file_extras) {
    j["step"] = r.step;
    json pos = json::array();
    for (const PositionalMap& m : r.positional) {
      json rows = json::array();
      for (const auto& row : m.weights) {
        json out = json::array();
        for (double w : row) out.push_back(std::round(w * 1e6) / 1e6);
        rows.push_back(out);
      }
      pos.push_back({{"head", m.head}, {"weights", rows}});
    }
    j["positional"] = pos;
  }
  return j;
}

CircuitsResult circuits_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "", "expected an object");
  CircuitsResult r;
  if (j.contains("step") && j["step"].is_number_integer()) r.step = j["step"].get<int64_t>();
  for (const char* key : {"composition", "heads"})
    if (!j.contains(key) || !j.at(key).is_array())
      io::json_error(source, std::string("/") + key, "expected an array");
  const json& comp = j.at("composition");
  for (size_t i = 0; i < comp.size(); ++i) {
    const std::string ptr = "/composition/" + std::to_string(i);
    CompositionScore c;
    std::tie(c.from_layer, c.from_head) = pair_at(comp[i], "from", source, ptr);
    std::tie(c.to_layer, c.to_head) = pair_at(comp[i], "to", source, ptr);
    c.q = number_at(comp[i], "q", source, ptr);
    c.k = number_at(comp[i], "k", source, ptr);
    c.v = number_at(comp[i], "v", source, ptr);
    r.composition.push_back(c);
  }
  if (j.contains("baseline") && !j["baseline"].is_null()) {
    if (!j["baseline"].is_object()) io::json_error(source, "/baseline", "expected an object or null");
    r.baseline = CompositionBaseline{number_at(j["baseline"], "q", source, "/baseline"),
                                     number_at(j["baseline"], "k", source, "/baseline"),
                                     number_at(j["baseline"], "v", source, "/baseline")};
  }
  const json& heads = j.at("heads");
  for (size_t i = 0; i < heads.size(); ++i) {
    const std::string ptr = "/heads/" + std::to_string(i);
    HeadCircuit h;
    h.layer = int_at(heads[i], "layer", source, ptr);
    h.head = int_at(heads[i], "head", source, ptr);
    h.copying = number_at(heads[i], "copying", source, ptr);
    if (heads[i].contains("prev_token_positional") && !heads[i]["prev_token_positional"].is_null())
      h.prev_token_positional = number_at(heads[i], "prev_token_positional", source, ptr);
    h.dla = number_at(heads[i], "dla", source, ptr);
    r.heads.push_back(h);
  }
  if (j.contains("components") && j["components"].is_array())
    for (size_t i = 0; i < j["components"].size(); ++i) {
      const json& c = j["components"][i];
      const std::string ptr = "/components/" + std::to_string(i);
      if (!c.contains("name") || !c["name"].is_string())
        io::json_error(source, ptr + "/name", "expected a string");
      r.components.push_back({c["name"].get<std::string>(), number_at(c, "dla", source, ptr)});
    }
  if (j.contains("positional") && j["positional"].is_array())
    for (size_t i = 0; i < j["positional"].size(); ++i) {
      const json& m = j["positional"][i];
      const std::string ptr = "/positional/" + std::to_string(i);
      PositionalMap p;
      p.head = int_at(m, "head", source, ptr);
      if (!m.contains("weights") || !m["weights"].is_array())
        io::json_error(source, ptr + "/weights", "expected rows");
      for (const json& row : m["weights"]) {
        if (!row.is_array() || row.size() != m["weights"].size())
          io::json_error(source, ptr + "/weights", "expected T rows of T numbers");
        std::vector<double> out;
        for (const json& w : row) {
          if (!w.is_number()) io::json_error(source, ptr + "/weights", "expected numbers");
          out.push_back(w.get<double>());
        }
        p.weights.push_back(out);
      }
      r.positional.push_back(p);
    }
  return r;
}

CircuitsResult read_circuits(const std::string& path) {
  return circuits_from_json(io::parse_json(io::read_text_file(path), path), path);
}

void write_circuits(const std::string& path, const CircuitsResult& r) {
  const std::string text = circuits_to_json(r, true).dump(1) + "\n";
  // Read back first: a value its reader refuses (a NaN written as null) is an error, not a file.
  circuits_from_json(io::parse_json(text, path), path + " (not written)");
  io::write_text_file_atomically(path, text);
}

std::string circuits_table(const CircuitsResult& r) {
  std::string out =
      "per head (copying: eigenvalues of W_E OV W_U, +1 copies; prev pos: positional QK mass on the\n"
      "previous position, layer 0; DLA: mean direct logit attribution to the correct token, held-out)\n";
  out += "layer head  copying  prev pos      DLA\n";
  for (const HeadCircuit& h : r.heads) {
    io::append_format(out, "%5d %4d %8.3f ", h.layer, h.head, h.copying);
    if (h.prev_token_positional)
      io::append_format(out, "%9.3f", *h.prev_token_positional);
    else
      out += "        -";
    io::append_format(out, " %8.3f\n", h.dla);
  }
  for (const ComponentDla& c : r.components)
    io::append_format(out, "DLA %-14s %8.3f\n", c.name.c_str(), c.dla);
  if (!r.baseline) {
    out += "\ncomposition: skipped (it needs at least 2 layers)\n";
    return out;
  }
  io::append_format(
      out,
      "\ncomposition ||M||_F / (||X||_F ||Y||_F) of each earlier head into each later head ('*': the\n"
      "largest of its column for that later head); random baseline q %.3f  k %.3f  v %.3f\n",
      r.baseline->q, r.baseline->k, r.baseline->v);
  out += "from   -> to         Q        K        V\n";
  std::map<std::pair<int, int>, CompositionScore> best_q, best_k, best_v;
  for (const CompositionScore& c : r.composition) {
    const auto key = std::make_pair(c.to_layer, c.to_head);
    if (!best_q.count(key) || c.q > best_q[key].q) best_q[key] = c;
    if (!best_k.count(key) || c.k > best_k[key].k) best_k[key] = c;
    if (!best_v.count(key) || c.v > best_v[key].v) best_v[key] = c;
  }
  for (const CompositionScore& c : r.composition) {
    const auto key = std::make_pair(c.to_layer, c.to_head);
    io::append_format(out, "%-6s -> %-6s %7.3f%s %7.3f%s %7.3f%s\n",
                      head_label(c.from_layer, c.from_head).c_str(),
                      head_label(c.to_layer, c.to_head).c_str(), c.q, best_q[key].q == c.q ? "*" : " ", c.k,
                      best_k[key].k == c.k ? "*" : " ", c.v, best_v[key].v == c.v ? "*" : " ");
  }
  return out;
}

std::string svg_composition(const CircuitsResult& r, const std::string& title) {
  if (r.composition.empty()) return "";
  std::vector<std::pair<int, int>> from, to;
  for (const CompositionScore& c : r.composition) {
    from.push_back({c.from_layer, c.from_head});
    to.push_back({c.to_layer, c.to_head});
  }
  for (auto* v : {&from, &to}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  std::vector<MatrixPanel> panels;
  for (const char* kind : {"Q", "K", "V"}) {
    MatrixPanel p{std::string(kind) + "-composition", {}, {}, {}};
    for (const auto& [l, h] : from) p.row_labels.push_back(head_label(l, h));
    for (const auto& [l, h] : to) p.col_labels.push_back(head_label(l, h));
    p.values.assign(from.size(), std::vector<double>(to.size(), NAN));
    for (const CompositionScore& c : r.composition) {
      const size_t i =
          std::find(from.begin(), from.end(), std::make_pair(c.from_layer, c.from_head)) - from.begin();
      const size_t j = std::find(to.begin(), to.end(), std::make_pair(c.to_layer, c.to_head)) - to.begin();
      p.values[i][j] = kind[0] == 'Q' ? c.q : kind[0] == 'K' ? c.k : c.v;
    }
    panels.push_back(p);
  }
  MatrixSvgOptions opts;
  opts.title = title;
  char note[200];
  std::snprintf(
      note, sizeof note,
      "rows: earlier head (writes), columns: later head (reads); random baseline q %.3f, k %.3f, v %.3f",
      r.baseline ? r.baseline->q : NAN, r.baseline ? r.baseline->k : NAN, r.baseline ? r.baseline->v : NAN);
  opts.note = note;
  opts.legend = "composition score";
  opts.diverging = false;
  return svg_matrices(panels, opts);
}

std::string svg_positional(const CircuitsResult& r, const std::string& title) {
  if (r.positional.empty()) return "";
  Probe probe;
  const size_t T = r.positional.front().weights.size();
  for (size_t t = 0; t < T; ++t) {
    probe.ids.push_back(static_cast<int>(t));
    probe.tokens.push_back("pos " + std::to_string(t));
  }
  for (const PositionalMap& m : r.positional) {
    HeadMap h{0, m.head, {}};
    for (const auto& row : m.weights) h.weights.push_back(std::vector<float>(row.begin(), row.end()));
    probe.maps.push_back(h);
  }
  SvgOptions opts;
  opts.title = title;
  return svg_attention_grid(probe, opts);
}

}  // namespace findings
