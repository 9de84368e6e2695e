// The Fourier analysis's JSON, measures.jsonl, terminal summary and SVGs (see fourier_view.h).
#include "findings/fourier_view.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "findings/chart_scale.h"
#include "findings/svg_heatmap.h"
#include "findings/svg_matrix.h"
#include "io/append_format.h"
#include "io/json_read.h"

namespace findings {

using nlohmann::json;

namespace {

// The measures' numeric keys, in the order measures.jsonl writes them: the one list of them.
struct MeasureKey {
  const char* key;
  double FourierMeasures::*member;
};
constexpr MeasureKey kMeasureKeys[] = {
    {"train_loss", &FourierMeasures::train_loss},
    {"train_acc", &FourierMeasures::train_acc},
    {"test_loss", &FourierMeasures::test_loss},
    {"test_acc", &FourierMeasures::test_acc},
    {"restricted_loss", &FourierMeasures::restricted_loss},
    {"excluded_loss", &FourierMeasures::excluded_loss},
    {"gini_embed", &FourierMeasures::gini_embed},
    {"gini_neuron_logit", &FourierMeasures::gini_neuron_logit},
    {"weight_norm_sq", &FourierMeasures::weight_norm_sq},
};

// Bars over k = 1..K, one chart per spectrum, key frequencies in red.
void bar_chart(std::string& svg, double y0, const std::string& title, const std::vector<double>& values,
               const std::vector<int>& keys, double width) {
  const double left = 50, plot_w = width - left - 10, plot_h = 90;
  double top = 0;
  for (double v : values) top = std::max(top, v);
  if (top <= 0) top = 1;
  io::append_format(svg, "<text x=\"%g\" y=\"%g\" font-size=\"12\">%s</text>\n", left, y0 + 12,
                    xml_escape(title).c_str());
  const double base = y0 + 20 + plot_h, bar = plot_w / std::max<size_t>(1, values.size());
  io::append_format(svg, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#888\"/>\n", left, base,
                    left + plot_w, base);
  io::append_format(svg, "<text x=\"%g\" y=\"%g\" font-size=\"10\" text-anchor=\"end\">%.3g</text>\n",
                    left - 4, y0 + 24, top);
  for (size_t i = 0; i < values.size(); ++i) {
    const int k = static_cast<int>(i + 1);
    const bool key = std::find(keys.begin(), keys.end(), k) != keys.end();
    const double h = values[i] / top * plot_h;
    io::append_format(svg,
                      "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>k %d: "
                      "%.4g</title></rect>\n",
                      left + i * bar, base - h, std::max(0.5, bar - 0.5), h, key ? "#d62728" : "#4c72b0", k,
                      values[i]);
    if (key || k == 1 || k == static_cast<int>(values.size()))
      io::append_format(svg, "<text x=\"%.2f\" y=\"%g\" font-size=\"9\" text-anchor=\"middle\">%d</text>\n",
                        left + (i + 0.5) * bar, base + 11, k);
  }
}

std::string list_text(const std::vector<int>& ks) {
  std::string text;
  for (int k : ks) text += (text.empty() ? "" : ", ") + std::to_string(k);
  return text.empty() ? "none" : text;
}

}  // namespace

json measures_to_json(const FourierMeasures& m) {
  json j = json::object();
  j["step"] = m.step;
  for (const MeasureKey& k : kMeasureKeys) j[k.key] = m.*k.member;
  j["key_frequencies"] = m.key_frequencies;
  return j;
}

json fourier_to_json(const FourierReport& r) {
  json j = measures_to_json(r.measures);
  j.erase("step");
  j["p"] = r.p;
  j["embed_norms"] = r.embed_norms;
  j["unembed_norms"] = r.unembed_norms;
  j["neuron_logit_norms"] = r.neuron_logit_norms;
  json neurons = json::array();
  for (const FourierNeuron& n : r.neurons)
    neurons.push_back({{"index", n.index}, {"frequency", n.frequency}, {"explained", n.explained}});
  j["neurons"] = neurons;
  return j;
}

FourierReport fourier_from_json(const json& j, const std::string& source) {
  auto need = [&](const char* key, bool (json::*is)() const, const char* what) -> const json& {
    if (!j.is_object() || !j.contains(key) || !(j.at(key).*is)())
      throw std::runtime_error(source + ": /" + key + ": expected " + what);
    return j.at(key);
  };
  auto numbers = [&](const char* key) {
    std::vector<double> out;
    for (const json& v : need(key, &json::is_array, "an array of numbers")) {
      if (!v.is_number()) throw std::runtime_error(source + ": /" + key + ": expected an array of numbers");
      out.push_back(v.get<double>());
    }
    return out;
  };
  FourierReport r;
  r.p = need("p", &json::is_number_integer, "an integer").get<int>();
  for (const MeasureKey& k : kMeasureKeys) r.measures.*k.member = need(k.key, &json::is_number, "a number");
  for (const json& k : need("key_frequencies", &json::is_array, "an array of integers"))
    if (k.is_number_integer()) r.measures.key_frequencies.push_back(k.get<int>());
  r.embed_norms = numbers("embed_norms");
  r.unembed_norms = numbers("unembed_norms");
  r.neuron_logit_norms = numbers("neuron_logit_norms");
  for (const json& n : need("neurons", &json::is_array, "an array of neurons")) {
    if (!n.is_object() || !n.value("index", json()).is_number_integer() ||
        !n.value("frequency", json()).is_number_integer() || !n.value("explained", json()).is_number())
      throw std::runtime_error(source +
                               ": /neurons: expected {\"index\", \"frequency\", \"explained\"} objects");
    r.neurons.push_back(
        {n.at("index").get<int>(), n.at("frequency").get<int>(), n.at("explained").get<double>()});
  }
  return r;
}

std::vector<FourierMeasures> read_measures(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::vector<FourierMeasures> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    json j;
    try {
      j = io::parse_json_text(line, where);
    } catch (const io::JsonError&) {
      if (in.eof()) break;  // a last line torn by a crash
      throw std::runtime_error(where + ": not JSON");
    }
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
      throw std::runtime_error(where + ": /step: expected an integer");
    FourierMeasures m;
    m.step = j["step"].get<int64_t>();
    for (const MeasureKey& k : kMeasureKeys) {
      if (!j.contains(k.key) || !j[k.key].is_number())
        throw std::runtime_error(where + ": /" + k.key + ": expected a number");
      m.*k.member = j[k.key].get<double>();
    }
    if (j.contains("key_frequencies") && j["key_frequencies"].is_array())
      for (const json& k : j["key_frequencies"])
        if (k.is_number_integer()) m.key_frequencies.push_back(k.get<int>());
    out.push_back(m);
  }
  return out;
}

std::string fourier_summary(const FourierReport& r) {
  const FourierMeasures& m = r.measures;
  std::string s;
  io::append_format(s, "p %d: key frequencies %s\n", r.p, list_text(m.key_frequencies).c_str());
  io::append_format(s, "  train loss %.4g  acc %.2f%%   held-out loss %.4g  acc %.2f%%\n", m.train_loss,
                    100 * m.train_acc, m.test_loss, 100 * m.test_acc);
  io::append_format(s, "  restricted loss (held out) %.4g   excluded loss (train) %.4g\n", m.restricted_loss,
                    m.excluded_loss);
  io::append_format(s, "  Gini: embedding %.3f, neuron-logit map %.3f   sum of squared weights %.4g\n",
                    m.gini_embed, m.gini_neuron_logit, m.weight_norm_sq);
  auto top = [](const std::vector<double>& v) {
    std::vector<int> k(v.size());
    for (size_t i = 0; i < v.size(); ++i) k[i] = static_cast<int>(i + 1);
    std::sort(k.begin(), k.end(), [&](int a, int b) { return v[a - 1] > v[b - 1]; });
    k.resize(std::min<size_t>(k.size(), 5));
    return k;
  };
  io::append_format(s, "  largest frequencies: embedding %s; unembedding %s; neuron-logit %s\n",
                    list_text(top(r.embed_norms)).c_str(), list_text(top(r.unembed_norms)).c_str(),
                    list_text(top(r.neuron_logit_norms)).c_str());
  std::vector<int> per_k(r.embed_norms.size() + 1, 0);
  int clustered = 0;
  for (const FourierNeuron& n : r.neurons)
    if (n.explained >= kNeuronExplained && n.frequency > 0 && n.frequency < static_cast<int>(per_k.size())) {
      ++per_k[n.frequency];
      ++clustered;
    }
  io::append_format(s, "  neurons with one frequency explaining >= %g%% of their variance: %d of %zu",
                    100 * kNeuronExplained, clustered, r.neurons.size());
  for (size_t k = 1; k < per_k.size(); ++k)
    if (per_k[k] > 0) io::append_format(s, "%s k %zu: %d", k == 1 ? "" : ",", k, per_k[k]);
  s += "\n";
  return s;
}

std::string fourier_spectra_svg(const FourierReport& r) {
  const double width = 640, height = 3 * 130 + 10;
  std::string svg;
  io::append_format(svg,
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %g %g\" width=\"%g\" "
                    "font-family=\"sans-serif\" role=\"img\" aria-label=\"Fourier spectra\">\n",
                    width, height, width);
  const std::vector<int>& keys = r.measures.key_frequencies;
  bar_chart(svg, 0, "W_E: norm per frequency k (red: key frequencies)", r.embed_norms, keys, width);
  bar_chart(svg, 130, "W_U on the value classes: norm per frequency", r.unembed_norms, keys, width);
  bar_chart(svg, 260, "W_L = W_U W_out (neuron-logit map): norm per frequency", r.neuron_logit_norms, keys,
            width);
  svg += "</svg>\n";
  return svg;
}

std::string fourier_neurons_svg(const FourierReport& r) {
  std::vector<size_t> order(r.neurons.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const FourierNeuron &x = r.neurons[a], &y = r.neurons[b];
    return x.frequency != y.frequency ? x.frequency < y.frequency : x.explained > y.explained;
  });
  MatrixPanel panel;
  panel.title = "neurons (rows, grouped by their best frequency) x frequency k: variance explained";
  for (size_t k = 1; k <= r.embed_norms.size(); ++k) panel.col_labels.push_back(std::to_string(k));
  for (size_t i : order) {
    panel.row_labels.push_back(std::to_string(r.neurons[i].index));
    panel.values.push_back(r.neuron_explained[i]);
  }
  MatrixSvgOptions opts;
  opts.title = "MLP neurons by frequency";
  opts.legend = "fraction of variance";
  opts.diverging = false;
  opts.range = 1;
  return svg_matrices({panel}, opts);
}

std::string fourier_logits_svg(const FourierReport& r) {
  MatrixPanel panel;
  panel.title = "logit of class " + std::to_string(r.logit_class) + " over a (rows) and b (columns)";
  for (int v = 0; v < r.p; ++v) {
    panel.row_labels.push_back(std::to_string(v));
    panel.col_labels.push_back(std::to_string(v));
  }
  panel.values = r.class_logits;
  MatrixSvgOptions opts;
  opts.title = "Logits of one class";
  opts.legend = "logit";
  return svg_matrices({panel}, opts);
}

GrokkingPhases grokking_phases(const std::vector<FourierMeasures>& ms) {
  GrokkingPhases ph;
  size_t mem = ms.size(), gen = ms.size();
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i].train_acc >= 1.0) {
      mem = i;
      break;
    }
  if (mem == ms.size()) return ph;
  ph.memorised = ms[mem].step;
  for (size_t i = mem; i < ms.size(); ++i)
    if (ms[i].test_acc >= 0.99) {
      gen = i;
      break;
    }
  if (gen < ms.size()) ph.generalised = ms[gen].step;
  size_t peak = mem;
  for (size_t i = mem; i < std::min(gen + 1, ms.size()); ++i)
    if (ms[i].excluded_loss > ms[peak].excluded_loss) peak = i;
  if (gen < ms.size()) ph.circuit_formed = ms[peak].step;
  return ph;
}

std::string measures_svg(const std::vector<FourierMeasures>& ms) {
  struct Series {
    const char* label;
    double FourierMeasures::*member;
  };
  struct Panel {
    const char* title;
    bool log;
    std::vector<Series> series;
  };
  const std::vector<Panel> panels = {
      {"loss (log scale)",
       true,
       {{"train", &FourierMeasures::train_loss},
        {"held out", &FourierMeasures::test_loss},
        {"restricted (held out)", &FourierMeasures::restricted_loss},
        {"excluded (train)", &FourierMeasures::excluded_loss}}},
      {"Gini coefficient of the spectra",
       false,
       {{"W_E", &FourierMeasures::gini_embed}, {"W_L", &FourierMeasures::gini_neuron_logit}}},
      {"sum of squared weights", false, {{"weights", &FourierMeasures::weight_norm_sq}}},
  };
  const double width = 640, panel_h = 170, left = 60, right = 150, plot_w = width - left - right;
  const double height = panels.size() * (panel_h + 30) + 10;
  std::string svg;
  io::append_format(
      svg,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %g %g\" width=\"%g\" "
      "font-family=\"sans-serif\" role=\"img\" aria-label=\"Progress measures over training\">\n",
      width, height, width);
  if (ms.empty()) {
    svg += "<text x=\"10\" y=\"20\">no measures</text></svg>\n";
    return svg;
  }
  const double last_step = std::max<double>(1, static_cast<double>(ms.back().step));
  const GrokkingPhases ph = grokking_phases(ms);
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const Panel& panel = panels[pi];
    const double y0 = 10 + pi * (panel_h + 30), top = y0 + 18, bottom = y0 + panel_h;
    double lo = INFINITY, hi = -INFINITY;
    for (const FourierMeasures& m : ms)
      for (const Series& s : panel.series) {
        const double v = m.*s.member;
        if (panel.log && !(v > 0)) continue;
        lo = std::min(lo, panel.log ? std::log10(v) : v);
        hi = std::max(hi, panel.log ? std::log10(v) : v);
      }
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (!panel.log) lo = std::min(lo, 0.0);
    if (hi - lo < 1e-12) hi = lo + 1;
    auto X = [&](double step) { return left + step / last_step * plot_w; };
    auto Y = [&](double v) {
      const double t = panel.log ? std::log10(std::max(v, 1e-300)) : v;
      return bottom - (std::clamp(t, lo, hi) - lo) / (hi - lo) * (bottom - top);
    };
    io::append_format(svg, "<text x=\"%g\" y=\"%g\" font-size=\"12\">%s</text>\n", left, y0 + 10,
                      xml_escape(panel.title).c_str());
    io::append_format(
        svg,
        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#888\"/><line x1=\"%g\" y1=\"%g\" "
        "x2=\"%g\" y2=\"%g\" stroke=\"#888\"/>\n",
        left, bottom, left + plot_w, bottom, left, top, left, bottom);
    for (double t : nice_ticks(lo, hi, 4)) {
      if (t < lo || t > hi) continue;
      const double y = bottom - (t - lo) / (hi - lo) * (bottom - top);
      io::append_format(svg, "<text x=\"%g\" y=\"%.1f\" font-size=\"9\" text-anchor=\"end\">%.3g</text>\n",
                        left - 4, y + 3, panel.log ? std::pow(10.0, t) : t);
    }
    for (double t : nice_ticks(0, last_step, 5))
      if (t <= last_step)
        io::append_format(svg, "<text x=\"%.1f\" y=\"%g\" font-size=\"9\" text-anchor=\"middle\">%g</text>\n",
                          X(t), bottom + 11, t);
    // The phase boundaries.
    const std::pair<int64_t, const char*> marks[] = {
        {ph.memorised, "memorised"}, {ph.circuit_formed, "circuit"}, {ph.generalised, "generalised"}};
    for (const auto& [step, name] : marks) {
      if (step < 0) continue;
      io::append_format(svg,
                        "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#999\" "
                        "stroke-dasharray=\"3,3\"><title>%s at step %lld</title></line>\n",
                        X(double(step)), top, X(double(step)), bottom, name, static_cast<long long>(step));
      if (pi == 0)
        io::append_format(svg, "<text x=\"%.1f\" y=\"%g\" font-size=\"9\" fill=\"#666\">%s</text>\n",
                          X(double(step)) + 2, top + 8, name);
    }
    for (size_t si = 0; si < panel.series.size(); ++si) {
      const Series& s = panel.series[si];
      std::string points;
      for (const FourierMeasures& m : ms) {
        const double v = m.*s.member;
        if (panel.log && !(v > 0)) continue;
        io::append_format(points, "%.1f,%.1f ", X(double(m.step)), Y(v));
      }
      io::append_format(svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n",
                        category_colour(si), points.c_str());
      io::append_format(svg, "<text x=\"%g\" y=\"%g\" font-size=\"10\" fill=\"%s\">%s</text>\n",
                        left + plot_w + 8, top + 12 + 13 * si, category_colour(si),
                        xml_escape(s.label).c_str());
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace findings
