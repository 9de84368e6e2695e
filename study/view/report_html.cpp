// The run report page (see report_html.h). Static parts (curves, score charts, the score table) are
// rendered here as inline SVG/HTML; the attention grid is drawn in the browser from embedded JSON because
// pre-rendering every step x probe as SVG would make the page ten times larger.
#include "study/view/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "io/append_format.h"
#include "io/atomic_file.h"
#include "study/view/report_circuits.h"
#include "study/view/svg_heatmap.h"

namespace study {
namespace {

using nlohmann::json;

// Head colours for the score charts: a categorical palette, one colour per (layer, head) in order.
const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Round tick values (1, 2, 5 x 10^k) covering [lo, hi] with about n intervals.
std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

struct Series {
  std::string name, colour;
  std::vector<std::pair<double, double>> points;  // (x, y), finite only
  bool markers = false;
};

// A line chart with axes, ticks, axis labels and a legend; y_fixed gives a fixed y range (e.g. 0..1).
std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& x_label, const std::string& y_label,
                       std::optional<std::pair<double, double>> y_fixed, bool legend = true) {
  // With a legend, its entries sit in a row under the title, never over the data.
  const double W = 440, H = 250, L = 58, R = 14, T = legend ? 46 : 30, B = 44;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::string out;
  io::append_format(
      out, "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">", W,
      H, W, H);
  io::append_format(out, "<text x=\"%.0f\" y=\"18\" class=\"ct\">%s</text>", L, xml_escape(title).c_str());
  if (!std::isfinite(x0)) {
    io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"muted\">no data yet</text></svg>", L, H / 2);
    return out;
  }
  if (y_fixed) {
    y0 = y_fixed->first, y1 = y_fixed->second;
  } else {
    y0 = std::min(0.0, y0);  // losses and rates read best from zero
    if (y1 <= y0) y1 = y0 + 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  const auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  const auto Y = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  for (double t : nice_ticks(y0, y1, 5)) {
    io::append_format(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", L, W - R,
                      Y(t), Y(t));
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g</text>", L - 6,
                      Y(t) + 4, t);
  }
  for (double t : nice_ticks(x0, x1, 5)) {
    io::append_format(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>", X(t),
                      X(t), H - B, H - B + 5);
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%g</text>",
                      X(t), H - B + 18, t);
  }
  io::append_format(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" class=\"axis\"/>", L, W - R,
                    H - B, H - B);
  io::append_format(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" class=\"axis\"/>", L, L, T,
                    H - B);
  io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"al\" text-anchor=\"middle\">%s</text>",
                    (L + W - R) / 2, H - 6, xml_escape(x_label).c_str());
  io::append_format(out,
                    "<text x=\"14\" y=\"%.0f\" class=\"al\" text-anchor=\"middle\" transform=\"rotate(-90 14 "
                    "%.0f)\">%s</text>",
                    (T + H - B) / 2, (T + H - B) / 2, xml_escape(y_label).c_str());
  int shown = 0;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    out += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + s.colour + "\" points=\"";
    for (const auto& [x, y] : s.points) io::append_format(out, "%.1f,%.1f ", X(x), Y(y));
    out += "\"/>";
    if (s.markers)
      for (const auto& [x, y] : s.points)
        io::append_format(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\"/>", X(x), Y(y),
                          s.colour.c_str());
    if (legend) {
      const double lx = L + 130 * shown++, ly = 33;
      io::append_format(
          out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>", lx,
          lx + 18, ly, ly, s.colour.c_str());
      io::append_format(out, "<text x=\"%.0f\" y=\"%.1f\" class=\"tick\">%s</text>", lx + 24, ly + 4,
                        xml_escape(s.name).c_str());
    }
  }
  out += "</svg>";
  return out;
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "&ndash;";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A score cell shaded on the weights' colour scale, bold when the head clearly shows the pattern.
std::string score_cell(double v) {
  if (!std::isfinite(v)) return "<td class=\"num muted\">&ndash;</td>";
  std::string out;
  io::append_format(out, "<td class=\"num%s\" style=\"background:%s;color:%s\">%s</td>",
                    v >= 0.5 ? " hi" : "", sequential_colour(v).c_str(), v > 0.55 ? "#fff" : "#111",
                    fixed(v, 3).c_str());
  return out;
}

std::string scores_table(const std::vector<HeadScores>& heads) {
  if (heads.empty()) return "<p class=\"muted\">No head scores were written for this run.</p>";
  bool ablation = false, loss = false;
  for (const HeadScores& h : heads)
    if (h.ablation) ablation = true, loss = loss || h.ablation->zero_loss || h.ablation->mean_loss;
  // The head whose ablation costs most is the one the model relies on: mark the lowest accuracy.
  double min_zero = std::numeric_limits<double>::infinity(), min_mean = min_zero;
  for (const HeadScores& h : heads)
    if (h.ablation)
      min_zero = std::min(min_zero, h.ablation->zero_acc),
      min_mean = std::min(min_mean, h.ablation->mean_acc);
  std::string out =
      "<table class=\"scores\"><thead><tr><th>layer</th><th>head</th><th>task</th><th>previous token</th>"
      "<th>induction</th><th>first token</th>";
  if (ablation) out += "<th>zeroed: acc</th><th>mean-ablated: acc</th>";
  if (loss) out += "<th>zeroed: loss</th><th>mean-ablated: loss</th>";
  out += "</tr></thead><tbody>";
  for (const HeadScores& h : heads) {
    io::append_format(out, "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td>", h.layer, h.head);
    out += score_cell(h.task) + score_cell(h.previous_token) + score_cell(h.induction) +
           score_cell(h.first_token);
    if (ablation) {
      const auto& a = h.ablation;
      io::append_format(out, "<td class=\"num%s\">%s</td>", a && a->zero_acc == min_zero ? " hi low" : "",
                        a ? fixed(a->zero_acc, 3).c_str() : "&ndash;");
      io::append_format(out, "<td class=\"num%s\">%s</td>", a && a->mean_acc == min_mean ? " hi low" : "",
                        a ? fixed(a->mean_acc, 3).c_str() : "&ndash;");
    }
    if (loss) {
      const auto& a = h.ablation;
      io::append_format(out, "<td class=\"num\">%s</td><td class=\"num\">%s</td>",
                        a && a->zero_loss ? fixed(*a->zero_loss, 3).c_str() : "&ndash;",
                        a && a->mean_loss ? fixed(*a->mean_loss, 3).c_str() : "&ndash;");
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

std::string head_name(int layer, int head) {
  return "L" + std::to_string(layer) + " H" + std::to_string(head);
}

// JSON inside <script>: '<' only occurs inside JSON strings, where \u003c means the same, and then no token
// name can close the tag ("</script>") or open a comment.
std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

constexpr const char* kCss = R"CSS(
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;margin:24px 32px;color:#1a1a1a;background:#fff;max-width:1800px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.muted{color:#777}.summary{color:#444;margin:0 0 8px}.row{display:flex;flex-wrap:wrap;gap:16px}
.chart{border:1px solid #eee;background:#fff}.chart .ct{font-size:13px;font-weight:bold;fill:#222}
.chart .tick{font-size:11px;fill:#444}.chart .al{font-size:12px;fill:#333}.chart .grid{stroke:#eee}.chart .axis{stroke:#555}
.chart .muted{fill:#777;font-size:12px}
table.scores{border-collapse:collapse;font-size:13px}table.scores th,table.scores td{border:1px solid #ddd;padding:4px 10px}
table.scores th{background:#f5f5f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.hi{font-weight:bold}td.low{background:#fde0dd}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:12px;margin:6px 0}.sw{display:inline-block;width:14px;height:4px;vertical-align:middle;margin-right:4px}
.controls{display:flex;flex-wrap:wrap;align-items:center;gap:12px;margin:8px 0 12px;font-size:14px;position:sticky;top:0;background:#fff;padding:8px 0;z-index:1;border-bottom:1px solid #eee}
.controls input[type=range]{width:360px}#step-label{font-weight:bold;min-width:90px}
.scale{display:flex;align-items:center;gap:8px;font-size:12px;color:#333}
.bar{width:200px;height:12px;border:1px solid #888}.masked{width:14px;height:14px;border:1px solid #888;
background:repeating-linear-gradient(45deg,#eee 0 3px,#b0b0b0 3px 4.5px)}
#grid svg{display:block}p.note{font-size:13px;color:#555;max-width:900px}
)CSS";

// Draws the selected dump and probe as a grid of panels (rows layers, columns heads), with the same
// reading order and colours as svg_heatmap: destination tokens down the left, "(idx) token" across the top.
constexpr const char* kJs = R"JS(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('attograd-data').textContent);
  var NS = 'http://www.w3.org/2000/svg';
  var slider = document.getElementById('step'), probeSel = document.getElementById('probe');
  var label = document.getElementById('step-label'), grid = document.getElementById('grid');
  var play = document.getElementById('play'), timer = null;
  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function cut(s, n) { var a = Array.from(s); return a.length <= n ? s : a.slice(0, n - 1).join('') + '\u2026'; }
  function colour(w) { return data.seq[Math.max(0, Math.min(100, Math.round(w * 100)))]; }
  function fmt(v) { return (v === null || v === undefined) ? '\u2013' : v.toFixed(2); }
  function draw() {
    var d = data.dumps[+slider.value];
    label.textContent = 'step ' + d.step + ' (' + (+slider.value + 1) + '/' + data.dumps.length + ')';
    var p = d.probes[Math.min(+probeSel.value, d.probes.length - 1)];
    grid.textContent = '';
    if (!p) { grid.textContent = 'No probes at this step.'; return; }
    var T = p.tokens.length, cell = T <= 20 ? 18 : Math.max(6, 360 / T), ch = 0.62 * 11;
    var labels = p.tokens.map(function (t, i) { return cut('(' + i + ') ' + t, 14); });
    var chars = Math.max(3, Math.max.apply(null, labels.map(function (s) { return Array.from(s).length; })));
    var left = chars * ch + 8, top = chars * ch + 8, titleH = 34, gap = 28;
    var pw = left + T * cell, ph = titleH + top + T * cell;
    var layers = {}, maxHead = 0;
    p.maps.forEach(function (m) { (layers[m.layer] = layers[m.layer] || []).push(m); maxHead = Math.max(maxHead, m.head); });
    var order = Object.keys(layers).map(Number).sort(function (a, b) { return a - b; });
    var W = (maxHead + 1) * (pw + gap), H = order.length * (ph + gap);
    // Natural size when it fits, scaled down (labels included) when the window is narrower.
    var svg = el('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'font-family': 'DejaVu Sans, sans-serif',
                         style: 'max-width:100%;height:auto'}, grid);
    var defs = el('defs', {}, svg);
    var pat = el('pattern', {id: 'masked', patternUnits: 'userSpaceOnUse', width: 6, height: 6, patternTransform: 'rotate(45)'}, defs);
    el('rect', {width: 6, height: 6, fill: '#eeeeee'}, pat);
    el('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#b0b0b0', 'stroke-width': 2}, pat);
    var scores = (data.history[+slider.value] || {});
    order.forEach(function (layer, li) {
      layers[layer].forEach(function (m) {
        var x = m.head * (pw + gap), y = li * (ph + gap), gx = x + left, gy = y + titleH + top;
        var g = el('g', {}, svg);
        el('text', {x: gx, y: y + 14, 'font-size': 13, 'font-weight': 'bold', fill: '#222'}, g, 'layer ' + m.layer + ' head ' + m.head);
        var s = scores[m.layer + ',' + m.head];
        if (s) el('text', {x: gx, y: y + 28, 'font-size': 11, fill: '#555'}, g,
          (s.task !== null ? 'task ' + fmt(s.task) + '  ' : '') + 'prev ' + fmt(s.previous_token) + '  ind ' + fmt(s.induction) + '  first ' + fmt(s.first_token));
        var lg = el('g', {'font-family': 'DejaVu Sans Mono, Menlo, Consolas, monospace', 'font-size': 11, fill: '#333'}, g);
        for (var j = 0; j < T; j++) {
          var cx = gx + (j + 0.5) * cell + 11 * 0.35, cy = gy - 4;
          el('text', {x: cx, y: cy, transform: 'rotate(-90 ' + cx + ' ' + cy + ')'}, lg, labels[j]);
        }
        for (var i = 0; i < T; i++)
          el('text', {x: gx - 4, y: gy + (i + 0.5) * cell + 11 * 0.35, 'text-anchor': 'end'}, lg, labels[i]);
        for (i = 0; i < T; i++) for (j = 0; j < T; j++) {
          var masked = j > i, w = m.weights[i][j];
          var r = el('rect', {x: gx + j * cell, y: gy + i * cell, width: cell, height: cell, fill: masked ? 'url(#masked)' : colour(w)}, g);
          el('title', {}, r, '(' + i + ') ' + p.tokens[i] + ' looks at (' + j + ') ' + p.tokens[j] + ': ' + (masked ? 'masked' : w.toFixed(3)));
        }
        el('rect', {x: gx, y: gy, width: T * cell, height: T * cell, fill: 'none', stroke: '#888'}, g);
      });
    });
  }
  function fillProbes() {
    var d = data.dumps[+slider.value], keep = +probeSel.value || 0;
    probeSel.textContent = '';
    d.probes.forEach(function (p, k) {
      var o = document.createElement('option');
      o.value = k; o.textContent = 'probe ' + k + ': ' + cut(p.tokens.join(' '), 48);
      probeSel.appendChild(o);
    });
    probeSel.value = Math.min(keep, d.probes.length - 1);
  }
  if (!data.dumps.length) { grid.textContent = 'No attention dumps in this run.'; slider.disabled = true; play.disabled = true; return; }
  slider.max = data.dumps.length - 1;
  slider.value = data.dumps.length - 1;
  // A link can open a given dump and probe: report.html#dump=0&probe=2 (indices from 0).
  var want = /dump=(\d+)/.exec(location.hash), wantProbe = /probe=(\d+)/.exec(location.hash);
  if (want) slider.value = Math.min(+want[1], data.dumps.length - 1);
  slider.addEventListener('input', function () { fillProbes(); draw(); });
  probeSel.addEventListener('change', draw);
  play.addEventListener('click', function () {
    if (timer) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
    if (+slider.value >= data.dumps.length - 1) slider.value = 0;
    play.textContent = '\u275a\u275a pause';
    fillProbes(); draw();
    timer = setInterval(function () {
      if (+slider.value >= data.dumps.length - 1) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
      slider.value = +slider.value + 1; fillProbes(); draw();
    }, 900);
  });
  fillProbes();
  if (wantProbe) probeSel.value = Math.min(+wantProbe[1], probeSel.options.length - 1);
  draw();
  document.body.setAttribute('data-rendered', 'yes');
})();
)JS";

}  // namespace

std::string report_html(const ReportInputs& in) {
  const std::string title = in.title.empty() ? "attograd run" : in.title;

  // Scores over training: given, or computed from the dumps alone (no task score without ideal keys).
  std::vector<HeadScoresFile> history = in.score_history;
  const bool computed_history = history.empty();
  if (computed_history)
    for (const AttentionDump& d : in.dumps)
      history.push_back({d.step, compute_head_scores(d.probes, {}, d.probes)});

  // Curves.
  Series loss{"train loss", "#1f77b4", {}, false}, eval_loss{"eval loss", "#ff7f0e", {}, true},
      eval_acc{"eval accuracy", "#2ca02c", {}, true};
  for (const ReportMetrics& r : in.metrics) {
    if (std::isfinite(r.loss)) loss.points.push_back({double(r.step), r.loss});
    if (r.eval_loss && std::isfinite(*r.eval_loss))
      eval_loss.points.push_back({double(r.step), *r.eval_loss});
    if (r.eval_acc && std::isfinite(*r.eval_acc)) eval_acc.points.push_back({double(r.step), *r.eval_acc});
  }

  // Score charts: one line per head, coloured by its place in (layer, head) order.
  std::map<std::pair<int, int>, size_t> head_index;
  for (const HeadScoresFile& f : history)
    for (const HeadScores& h : f.heads) head_index.emplace(std::make_pair(h.layer, h.head), 0);
  for (const HeadScores& h : in.scores.heads) head_index.emplace(std::make_pair(h.layer, h.head), 0);
  {
    size_t k = 0;
    for (auto& [key, idx] : head_index) idx = k++;
  }
  struct ScoreKind {
    const char* title;
    double HeadScores::*field;
  };
  const ScoreKind kinds[] = {{"task score", &HeadScores::task},
                             {"previous-token score", &HeadScores::previous_token},
                             {"induction score", &HeadScores::induction},
                             {"first-token score", &HeadScores::first_token}};
  std::string score_charts;
  for (const ScoreKind& kind : kinds) {
    std::vector<Series> lines(head_index.size());
    bool any = false;
    for (const auto& [key, idx] : head_index) {
      lines[idx].name = head_name(key.first, key.second);
      lines[idx].colour = kPalette[idx % 10];
      lines[idx].markers = true;
    }
    for (const HeadScoresFile& f : history)
      for (const HeadScores& h : f.heads) {
        const double v = h.*kind.field;
        if (!std::isfinite(v)) continue;
        lines[head_index[{h.layer, h.head}]].points.push_back({double(f.step), v});
        any = true;
      }
    if (any) score_charts += line_chart(kind.title, lines, "step", "score", std::make_pair(0.0, 1.0), false);
  }

  // Embedded data for the attention viewer: dumps with weights rounded to 1e-3, the colour scale, and
  // per-step scores keyed "layer,head" (matched to dumps by step).
  json jd = json::array();
  for (const AttentionDump& d : in.dumps) {
    json probes = json::array();
    for (const Probe& p : d.probes) {
      json maps = json::array();
      for (const HeadMap& m : p.maps)
        maps.push_back({{"layer", m.layer}, {"head", m.head}, {"weights", weights_to_json(m.weights, 1e3)}});
      probes.push_back({{"tokens", p.tokens}, {"maps", std::move(maps)}});
    }
    jd.push_back({{"step", d.step}, {"probes", std::move(probes)}});
  }
  json seq = json::array();
  for (int k = 0; k <= 100; ++k) seq.push_back(sequential_colour(k / 100.0));
  json hist = json::array();
  for (const AttentionDump& d : in.dumps) {
    json by_head = json::object();
    for (const HeadScoresFile& f : history) {
      if (f.step != d.step) continue;
      for (const HeadScores& h : f.heads) {
        auto val = [](double v) {
          return std::isfinite(v) ? json(std::round(v * 1000) / 1000) : json(nullptr);
        };
        by_head[std::to_string(h.layer) + "," + std::to_string(h.head)] = {
            {"task", val(h.task)},
            {"previous_token", val(h.previous_token)},
            {"induction", val(h.induction)},
            {"first_token", val(h.first_token)}};
      }
    }
    hist.push_back(std::move(by_head));
  }
  const json data = {{"dumps", std::move(jd)}, {"seq", std::move(seq)}, {"history", std::move(hist)}};

  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + xml_escape(title) + " \u2014 attograd report</title>\n<style>" + std::string(kCss) +
         "</style>\n";
  out += "</head><body>\n<h1>" + xml_escape(title) + "</h1>\n<p class=\"summary\">";
  if (!in.metrics.empty()) {
    const ReportMetrics& last = in.metrics.back();
    io::append_format(out, "step %lld &middot; train loss %s", static_cast<long long>(last.step),
                      fixed(last.loss, 4).c_str());
    for (auto it = in.metrics.rbegin(); it != in.metrics.rend(); ++it)
      if (it->eval_acc) {
        io::append_format(out, " &middot; eval accuracy %s (step %lld)", fixed(*it->eval_acc, 3).c_str(),
                          static_cast<long long>(it->step));
        break;
      }
    io::append_format(out, " &middot; %.0f tokens/s", last.tokens_per_s);
  } else {
    out += "no metrics logged";
  }
  io::append_format(out, " &middot; %zu attention dumps</p>\n", in.dumps.size());

  out += "<h2>Training</h2>\n<div class=\"row\">";
  out += line_chart("loss", {loss, eval_loss}, "step", "cross-entropy", std::nullopt);
  out +=
      line_chart("held-out exact-match accuracy", {eval_acc}, "step", "accuracy", std::make_pair(0.0, 1.0));
  out += "</div>\n";

  out += "<h2>Head scores over training</h2>\n";
  out +=
      computed_history
          ? "<p class=\"note\">Computed from the attention dumps on their probes: previous-token and "
            "first-token "
            "scores, and the induction score over each probe's own repeated tokens. The task score needs the "
            "task's ideal keys and appears only in the final table.</p>\n"
          : "<p class=\"note\">Scores at each dumped step, as the trainer computed them.</p>\n";
  out += "<div class=\"legend\">";
  for (const auto& [key, idx] : head_index)
    io::append_format(out, "<span><span class=\"sw\" style=\"background:%s\"></span>%s</span>",
                      kPalette[idx % 10], head_name(key.first, key.second).c_str());
  out += "</div>\n<div class=\"row\">" +
         (score_charts.empty() ? std::string("<p class=\"muted\">No scores to chart.</p>") : score_charts) +
         "</div>\n";

  io::append_format(out, "<h2>Head scores at step %lld</h2>\n", static_cast<long long>(in.scores.step));
  out +=
      "<p class=\"note\">Mean attention mass per query row (see docs/head-scores.md). Shaded on the weight "
      "scale; bold at 0.5 or more. A map can mislead: read a score together with the ablation columns "
      "(accuracy with the head zeroed or mean-ablated; the lowest is marked).</p>\n";
  out += scores_table(in.scores.heads) + "\n";

  out += report_circuits_section(in.circuits) + report_patching_section(in.patchings, in.patching_names);

  out += "<h2>Attention over training</h2>\n";
  out +=
      "<div class=\"controls\"><button id=\"play\" type=\"button\">\u25b6 play</button>"
      "<label for=\"step\">dump</label><input id=\"step\" type=\"range\" min=\"0\" max=\"0\" value=\"0\" "
      "step=\"1\">"
      "<span id=\"step-label\"></span><label for=\"probe\">input</label><select id=\"probe\"></select>"
      "<span class=\"scale\">0<span class=\"bar\" style=\"background:linear-gradient(to right";
  for (int k = 0; k <= 10; ++k) out += "," + sequential_colour(k / 10.0);
  out += ")\"></span>1 attention weight <span class=\"masked\"></span> masked (future key)</span></div>\n";
  out +=
      "<p class=\"note\">Rows: destination (query) tokens; columns: source (key) tokens. Each row sums to 1 "
      "over its visible keys. Move the slider to watch a pattern form; hover a cell for its weight.</p>\n";
  out += "<div id=\"grid\"></div>\n";
  out += "<script type=\"application/json\" id=\"attograd-data\">" +
         script_safe(data.dump(-1, ' ', false, json::error_handler_t::replace)) + "</script>\n";
  out += "<script>" + std::string(kJs) + "</script>\n</body></html>\n";
  return out;
}

void write_report_html(const std::string& path, const ReportInputs& inputs) {
  io::write_text_file_atomically(path, report_html(inputs));
}

}  // namespace study
