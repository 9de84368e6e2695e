// The run report page (see report_html.h). Static parts (curves, score charts, the tables) are rendered
// here as inline SVG/HTML; the attention viewer is drawn in the browser from embedded data because
// pre-rendering every step x probe as SVG would make the page ten times larger.
#include "findings/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "findings/chart_scale.h"
#include "findings/report_assets.h"
#include "findings/report_circuits.h"
#include "findings/report_sae.h"
#include "findings/svg_heatmap.h"
#include "io/append_format.h"
#include "io/atomic_file.h"

namespace findings {
namespace {

using nlohmann::json;

struct Series {
  std::string name, colour;
  std::vector<std::pair<double, double>> points;  // (x, y), finite only
  bool markers = false;
};

// A step worth a vertical line on every training chart (a phase change).
struct StepMark {
  std::string name;
  double step = 0;
};

struct ChartSpec {
  std::string id;  // the element id of the chart's <figure>
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::optional<std::pair<double, double>> y_fixed;  // e.g. 0..1; else from 0 (linear) or the data (log)
  bool legend = true;
  bool log_y = false;  // non-positive values are left out
};

// A line chart as a <figure>: the SVG (axes, ticks, labels, a legend, the phase-change marks, a cursor line
// the script moves to the slider's step) scales with the page's width; the caption is the script's hover
// readout. Every chart shares the x-axis [0, x_max]. The data-* attributes give the script the mapping from
// steps and values to the SVG's coordinates.
std::string line_chart(const ChartSpec& c, double x_max, const std::vector<StepMark>& marks) {
  const double W = 440, H = 250, L = 58, R = 14, T = c.legend ? 46 : 30, B = 44;
  double y0 = std::numeric_limits<double>::infinity(), y1 = -y0;
  bool any = false;
  for (const Series& s : c.series)
    for (const auto& [x, y] : s.points)
      if (!c.log_y || y > 0) y0 = std::min(y0, y), y1 = std::max(y1, y), any = true;
  std::string out = "<figure class=\"chart-box\" id=\"" + c.id + "\">";
  const double x0 = 0, x1 = x_max > 0 ? x_max : 1;
  std::vector<double> yticks;
  if (c.y_fixed) {
    y0 = c.y_fixed->first, y1 = c.y_fixed->second;
    yticks = nice_ticks(y0, y1, 5);
  } else if (c.log_y) {
    yticks = log_ticks(any ? y0 : 0.1, any ? y1 : 1, &y0, &y1);
  } else {
    y0 = std::min(0.0, any ? y0 : 0.0);  // losses and rates read best from zero
    if (!any || y1 <= y0) y1 = y0 + 1;
    yticks = nice_ticks(y0, y1, 5);
  }
  const auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  const auto Y = [&](double y) {
    return c.log_y
               ? H - B - (std::log10(y) - std::log10(y0)) / (std::log10(y1) - std::log10(y0)) * (H - T - B)
               : H - B - (y - y0) / (y1 - y0) * (H - T - B);
  };
  io::append_format(out,
                    "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s%s against "
                    "step\" data-x0=\"%g\" data-x1=\"%g\" data-px0=\"%g\" data-px1=\"%g\" data-y0=\"%g\" "
                    "data-y1=\"%g\" data-py0=\"%g\" data-py1=\"%g\" data-log=\"%d\">",
                    W, H, xml_escape(c.title).c_str(), c.log_y ? " (log scale)" : "", x0, x1, L, W - R, y0,
                    y1, H - B, T, c.log_y ? 1 : 0);
  io::append_format(out, "<text x=\"%.0f\" y=\"18\" class=\"ct\">%s%s</text>", L, xml_escape(c.title).c_str(),
                    c.log_y ? " (log scale)" : "");
  for (double t : yticks) {
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
                    (L + W - R) / 2, H - 6, xml_escape(c.x_label).c_str());
  io::append_format(out,
                    "<text x=\"14\" y=\"%.0f\" class=\"al\" text-anchor=\"middle\" transform=\"rotate(-90 14 "
                    "%.0f)\">%s</text>",
                    (T + H - B) / 2, (T + H - B) / 2, xml_escape(c.y_label).c_str());
  // Phase changes: a dashed line each, labels stacked so that close steps stay legible.
  for (size_t k = 0; k < marks.size(); ++k) {
    const double x = X(marks[k].step), ly = T + 10 + 11.0 * k;
    const bool right = x + 3 + 6.0 * (marks[k].name.size() + 6) > W - R;  // else the label runs off
    io::append_format(
        out,
        "<g class=\"phase\"><title>%s phase change at step %.0f</title><line x1=\"%.1f\" "
        "x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s "
        "%.0f</text></g>",
        xml_escape(marks[k].name).c_str(), marks[k].step, x, x, T, H - B, right ? x - 3 : x + 3, ly,
        right ? "end" : "start", xml_escape(marks[k].name).c_str(), marks[k].step);
  }
  if (!any)
    io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"muted\">no data yet</text>", L + 10, H / 2);
  int shown = 0;
  for (const Series& s : c.series) {
    if (s.points.empty()) continue;
    out += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + s.colour + "\" data-name=\"" +
           xml_escape(s.name) + "\" points=\"";
    for (const auto& [x, y] : s.points)
      if (!c.log_y || y > 0) io::append_format(out, "%.1f,%.1f ", X(x), Y(y));
    out += "\"/>";
    if (s.markers)
      for (const auto& [x, y] : s.points)
        if (!c.log_y || y > 0)
          io::append_format(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\"/>", X(x), Y(y),
                            s.colour.c_str());
    if (c.legend) {
      const double lx = L + 130 * shown++, ly = 33;
      io::append_format(
          out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>", lx,
          lx + 18, ly, ly, s.colour.c_str());
      io::append_format(out, "<text x=\"%.0f\" y=\"%.1f\" class=\"tick\">%s</text>", lx + 24, ly + 4,
                        xml_escape(s.name).c_str());
    }
  }
  io::append_format(out,
                    "<line class=\"cursor\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" "
                    "visibility=\"hidden\"/><line class=\"hover\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" "
                    "y2=\"%.0f\" visibility=\"hidden\"/>",
                    L, L, T, H - B, L, L, T, H - B);
  out += "</svg><figcaption class=\"readout\" aria-live=\"polite\">&nbsp;</figcaption></figure>";
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
      "<th>induction</th><th>first token</th><th>duplicate token</th>";
  if (ablation) out += "<th>zeroed: acc</th><th>mean-ablated: acc</th>";
  if (loss) out += "<th>zeroed: loss</th><th>mean-ablated: loss</th>";
  out += "</tr></thead><tbody>";
  for (const HeadScores& h : heads) {
    io::append_format(out, "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td>", h.layer, h.head);
    out += score_cell(h.task) + score_cell(h.previous_token) + score_cell(h.induction) +
           score_cell(h.first_token) + score_cell(h.duplicate_token);
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

// What every section reads: the inputs and what is derived from them once.
struct ReportContext {
  const ReportInputs& in;
  const std::vector<HeadScoresFile>& history;  // scores at each dump
  bool computed_history = false;               // computed from the dumps (score_history_from_dumps)
  double x_max = 0;             // the last step of anything charted: every chart's x-axis is [0, x_max]
  std::vector<StepMark> marks;  // the phase-change steps, marked on every training chart
};

ReportContext make_context(const ReportInputs& in) {
  ReportContext c{in, in.score_history, in.score_history_from_dumps, 0, {}};
  for (const ReportMetrics& r : in.metrics) c.x_max = std::max(c.x_max, double(r.step));
  for (const AttentionDump& d : in.dumps) c.x_max = std::max(c.x_max, double(d.step));
  for (const HeadScoresFile& f : c.history) c.x_max = std::max(c.x_max, double(f.step));
  if (const auto& pc = in.scores.phase_change) {
    const std::pair<const char*, const std::optional<double>*> kinds[] = {
        {"induction", &pc->induction},
        {"previous token", &pc->previous_token},
        {"task", &pc->task},
        {"eval loss falls fastest", &pc->eval_loss_fall}};
    for (const auto& [name, step] : kinds)
      if (*step && std::isfinite(**step)) c.marks.push_back({name, **step});
  }
  return c;
}

// The attention viewer: the controls, the heads as thumbnails, the chosen head enlarged, the probe's
// tokens as a strip, all filled in by report.js from the embedded data.
std::string attention_section(const ReportContext& c) {
  std::string out =
      "<div class=\"controls\"><button id=\"play\" type=\"button\">\u25b6 play</button>"
      "<label for=\"step\">dump</label><input id=\"step\" type=\"range\" min=\"0\" max=\"0\" value=\"0\" "
      "step=\"1\" aria-describedby=\"step-label\">"
      "<span id=\"step-label\" aria-live=\"polite\"></span><label for=\"probe\">input</label>"
      "<select id=\"probe\"></select>"
      "<label for=\"strip-mode\">tokens show</label><select id=\"strip-mode\"><option value=\"to\">where the "
      "selected token attends</option><option value=\"from\">what attends to the selected token</option>"
      "</select>"
      "<span class=\"scale\">0<span class=\"bar\" style=\"background:linear-gradient(to right";
  for (int k = 0; k <= 10; ++k) out += "," + sequential_colour(k / 10.0);
  out += ")\"></span>1 attention weight <span class=\"masked\"></span> masked (future key)</span></div>\n";
  out +=
      "<p class=\"note\">Click a head (or use the arrow keys on the thumbnails) to enlarge it. In the map, "
      "rows are destination (query) tokens and columns source (key) tokens; each row sums to 1 over its "
      "visible keys. Hover a cell, or focus the map and move with the arrow keys, to read its weight; the "
      "token strip then shows where that query attends. Tokens that occur more than once in the input are "
      "underlined (<span class=\"rep-key\">repeated</span>). Arrow keys anywhere else on the page step "
      "through the dumps; the address keeps the dump, input and head, so a link opens this view.</p>\n"
      "<div class=\"viewer\"><div id=\"thumbs\" role=\"listbox\" aria-label=\"heads\"></div>"
      "<div id=\"focus\"><div id=\"focus-title\"></div><div id=\"focus-scores\" class=\"muted\"></div>"
      "<div id=\"focus-map\"></div><div id=\"readout\" aria-live=\"polite\">&nbsp;</div></div></div>\n"
      "<div id=\"strip\" class=\"strip\" aria-label=\"the input's tokens\"></div>\n";
  if (c.in.dumps.empty()) out += "<p class=\"muted\">No attention dumps in this run.</p>\n";
  return out;
}

std::string training_section(const ReportContext& c) {
  Series loss{"train loss", "#1f77b4", {}, false}, eval_loss{"eval loss", "#ff7f0e", {}, true},
      eval_acc{"eval accuracy", "#2ca02c", {}, true};
  for (const ReportMetrics& r : c.in.metrics) {
    if (std::isfinite(r.loss)) loss.points.push_back({double(r.step), r.loss});
    if (r.eval_loss && std::isfinite(*r.eval_loss))
      eval_loss.points.push_back({double(r.step), *r.eval_loss});
    if (r.eval_acc && std::isfinite(*r.eval_acc)) eval_acc.points.push_back({double(r.step), *r.eval_acc});
  }
  std::string out =
      "<p class=\"note\"><label><input type=\"checkbox\" id=\"log-loss\" checked> losses on a log scale"
      "</label>. Dashed lines: phase changes; the solid grey line follows the attention slider's step. "
      "Hover a chart to read its values.</p>\n<div class=\"charts\">";
  ChartSpec lin{"loss-linear", "loss", "step", "cross-entropy", {loss, eval_loss}, std::nullopt, true, false};
  ChartSpec log = lin;
  log.id = "loss-log", log.log_y = true;
  out += line_chart(log, c.x_max, c.marks);
  out += line_chart(lin, c.x_max, c.marks);
  out += line_chart({"accuracy",
                     "held-out exact-match accuracy",
                     "step",
                     "accuracy",
                     {eval_acc},
                     std::make_pair(0.0, 1.0),
                     true,
                     false},
                    c.x_max, c.marks);
  return out + "</div>\n";
}

std::string score_history_section(const ReportContext& c) {
  // One line per head, coloured by its place in (layer, head) order.
  std::map<std::pair<int, int>, size_t> head_index;
  for (const HeadScoresFile& f : c.history)
    for (const HeadScores& h : f.heads) head_index.emplace(std::make_pair(h.layer, h.head), 0);
  for (const HeadScores& h : c.in.scores.heads) head_index.emplace(std::make_pair(h.layer, h.head), 0);
  {
    size_t k = 0;
    for (auto& [key, idx] : head_index) idx = k++;
  }
  struct ScoreKind {
    const char *id, *title;
    double HeadScores::*field;
  };
  const ScoreKind kinds[] = {
      {"score-task", "task score", &HeadScores::task},
      {"score-previous-token", "previous-token score", &HeadScores::previous_token},
      {"score-induction", "induction score", &HeadScores::induction},
      {"score-first-token", "first-token score", &HeadScores::first_token},
      {"score-duplicate-token", "duplicate-token score", &HeadScores::duplicate_token}};
  std::string charts;
  for (const ScoreKind& kind : kinds) {
    std::vector<Series> lines(head_index.size());
    bool any = false;
    for (const auto& [key, idx] : head_index) {
      lines[idx].name = head_name(key.first, key.second);
      lines[idx].colour = category_colour(idx);
      lines[idx].markers = true;
    }
    for (const HeadScoresFile& f : c.history)
      for (const HeadScores& h : f.heads) {
        const double v = h.*kind.field;
        if (!std::isfinite(v)) continue;
        lines[head_index[{h.layer, h.head}]].points.push_back({double(f.step), v});
        any = true;
      }
    if (any)
      charts +=
          line_chart({kind.id, kind.title, "step", "score", lines, std::make_pair(0.0, 1.0), false, false},
                     c.x_max, c.marks);
  }
  std::string out =
      c.computed_history
          ? "<p class=\"note\">Computed from the attention dumps on their probes: previous-token and "
            "first-token scores, and the induction and duplicate-token scores over each probe's own repeated "
            "tokens. The task score needs the task's ideal keys and appears only in the final table.</p>\n"
          : "<p class=\"note\">Scores at each dumped step, as the trainer computed them.</p>\n";
  if (const auto& pc = c.in.scores.phase_change) {
    const auto step = [](const std::optional<double>& v) {
      return v ? "step " + fixed(*v, 0) : std::string("never");
    };
    out +=
        "<p class=\"note\" id=\"phase-change\">Phase change (best head's score first at 0.5, "
        "interpolated between dumps): induction " +
        step(pc->induction) + ", previous token " + step(pc->previous_token) + ", task " + step(pc->task) +
        "; held-out loss fell fastest " +
        (pc->eval_loss_fall ? "at " + step(pc->eval_loss_fall) : std::string("nowhere")) + ".</p>\n";
  }
  out += "<div class=\"legend\">";
  for (const auto& [key, idx] : head_index)
    io::append_format(out, "<span><span class=\"sw\" style=\"background:%s\"></span>%s</span>",
                      category_colour(idx), head_name(key.first, key.second).c_str());
  return out + "</div>\n" +
         (charts.empty() ? std::string("<p class=\"muted\">No scores to chart.</p>")
                         : "<div class=\"charts\">" + charts + "</div>") +
         "\n";
}

std::string final_scores_section(const ReportContext& c) {
  std::string out;
  io::append_format(
      out,
      "<p class=\"note\">At step %lld: mean attention mass per query row (see "
      "docs/head-scores.md). Shaded on the weight scale; bold at 0.5 or more. A map can mislead: "
      "read a score together with the ablation columns (accuracy with the head zeroed or "
      "mean-ablated; the lowest is marked).</p>\n",
      static_cast<long long>(c.in.scores.step));
  return out + "<div class=\"wide\">" + scores_table(c.in.scores.heads) + "</div>\n";
}

std::string circuits_section(const ReportContext& c) {
  return report_circuits_section(c.in.circuits);
}
std::string patching_section(const ReportContext& c) {
  return report_patching_section(c.in.patchings, c.in.patching_names);
}
std::string lens_section(const ReportContext& c) {
  return report_lens_section(c.in.lenses, c.in.lens_names);
}

std::string fourier_section(const ReportContext& c) {
  if (!c.in.fourier) return "";
  std::string out =
      "<p class=\"note\">The model in the Fourier basis of Z_p (docs/grokking.md): the norm of "
      "W_E, W_U and W_L = W_U W_out in each frequency k (key frequencies in red), each MLP "
      "neuron's variance explained per frequency, and one class's logits over (a, b). Written by "
      "attograd fourier (and by train at the end).</p>\n<pre>" +
      xml_escape(fourier_summary(*c.in.fourier)) + "</pre>\n";
  const char* labels[] = {"Fourier spectra", "neurons by frequency", "logits of one class"};
  for (size_t i = 0; i < c.in.fourier_svgs.size(); ++i)
    out += inline_svg(c.in.fourier_svgs[i], "fourier-" + std::to_string(i), labels[std::min<size_t>(i, 2)]) +
           "\n";
  return out;
}

std::string measures_section(const ReportContext& c) {
  if (c.in.measures.empty()) return "";
  const GrokkingPhases ph = grokking_phases(c.in.measures);
  auto step = [](int64_t s) { return s < 0 ? std::string("not reached") : "step " + std::to_string(s); };
  return "<p class=\"note\">The progress measures of grokking, every output.measures_every steps "
         "(measures.jsonl; docs/grokking.md): memorised (training accuracy 1) at " +
         step(ph.memorised) + ", circuit formed (excluded loss at its peak) at " + step(ph.circuit_formed) +
         ", generalised (held-out accuracy &gt;= 99%) at " + step(ph.generalised) + ".</p>\n" +
         inline_svg(measures_svg(c.in.measures), "measures", "progress measures over training") + "\n";
}

std::string sae_section(const ReportContext& c) {
  return report_sae_section(c.in.saes, c.in.sae_pages);
}

std::string graphs_section(const ReportContext& c) {
  if (c.in.graphs.empty()) return "";
  std::string out =
      "<p class=\"note\">The attribution graphs saved in this run (attograd graph; docs/graphs.md): each "
      "prompt's pruned graph and its replacement and completeness scores. Its viewer draws the graph and "
      "prunes it again with sliders.</p>\n<div class=\"wide\"><table class=\"scores\"><thead><tr>"
      "<th>graph</th><th>prompt</th><th>nodes</th><th>edges</th><th>replacement</th><th>completeness</th>"
      "<th>viewer</th></tr></thead><tbody>";
  for (const GraphSummary& g : c.in.graphs) {
    io::append_format(out,
                      "<tr><td>%s</td><td>%s</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
                      "<td class=\"num\">%.4f</td><td class=\"num\">%.4f</td>",
                      xml_escape(g.name).c_str(), xml_escape(g.prompt).c_str(),
                      static_cast<long long>(g.nodes), static_cast<long long>(g.links), g.replacement_score,
                      g.completeness_score);
    out += g.page.empty() ? "<td class=\"muted\">&ndash;</td>"
                          : "<td><a href=\"" + xml_escape(url_path(g.page)) + "\">graph.html</a></td>";
    out += "</tr>";
  }
  return out + "</tbody></table></div>\n";
}

std::string transcoders_section(const ReportContext& c) {
  const json& e = c.in.transcoders;
  if (!e.is_object() || !e.value("layers", json()).is_array()) return "";
  auto num = [](const json& j, const char* key) {
    const json v = j.value(key, json());
    return v.is_number() ? v.get<double>() : std::nan("");
  };
  std::string out =
      std::string("<p class=\"note\">The run's ") +
      (e.value("cross_layer", false) ? "cross-layer transcoder" : "transcoders") +
      " (attograd transcoder; docs/graphs.md), each layer's feature pages linked. With every MLP "
      "replaced at once: ";
  io::append_format(out, "CE %.4f against %.4f clean, %.4f of the loss recovered.</p>\n",
                    num(e, "ce_replaced"), num(e, "ce_clean"), num(e, "ce_loss_recovered"));
  out +=
      "<div class=\"wide\"><table class=\"scores\"><thead><tr><th>layer</th><th>d_sae</th>"
      "<th>explained variance</th><th>L0</th><th>dead</th><th>features</th></tr></thead><tbody>";
  const json& layers = e["layers"];
  for (size_t i = 0; i < layers.size(); ++i) {
    io::append_format(out,
                      "<tr><td class=\"num\">%lld</td><td class=\"num\">%lld</td><td class=\"num\">%.4f</td>"
                      "<td class=\"num\">%.2f</td><td class=\"num\">%lld</td>",
                      static_cast<long long>(num(layers[i], "layer")),
                      static_cast<long long>(num(layers[i], "d_sae")), num(layers[i], "explained_variance"),
                      num(layers[i], "l0"), static_cast<long long>(num(layers[i], "dead")));
    const std::string page = i < c.in.transcoder_pages.size() ? c.in.transcoder_pages[i] : std::string();
    out += page.empty() ? "<td class=\"muted\">&ndash;</td>"
                        : "<td><a href=\"" + xml_escape(url_path(page)) + "\">features.html</a></td>";
    out += "</tr>";
  }
  return out + "</tbody></table></div>\n";
}

// The page's sections in page order, each one entry: its anchor, its heading (also its entry in the
// navigation bar) and the function writing its body. A body that is empty leaves the section (and its
// navigation entry) out. To add a section, write its function and add its row here.
struct ReportSection {
  const char* id;
  const char* title;
  std::string (*body)(const ReportContext&);
};
const ReportSection kSections[] = {
    {"attention", "Attention over training", attention_section},
    {"training", "Training", training_section},
    {"scores-over-training", "Head scores over training", score_history_section},
    {"scores", "Final head scores", final_scores_section},
    {"circuits", "Circuits", circuits_section},
    {"patching", "Activation patching", patching_section},
    {"lens", "Logit lens and residual decomposition", lens_section},
    {"fourier", "Fourier analysis", fourier_section},
    {"measures", "Progress measures", measures_section},
    {"sae", "Sparse autoencoders", sae_section},
    {"transcoders", "Transcoders", transcoders_section},
    {"graphs", "Attribution graphs", graphs_section},
};

// The viewer's data: per dump and probe, each head's map in lower_triangle_base64 form as
// [layer, head, "base64"], the probe's tokens as an index into a shared list (probes repeat at every dump);
// the colour scale; per-dump scores keyed "layer,head" (matched to dumps by step).
json viewer_data(const ReportContext& c) {
  json steps = json::array(), dumps = json::array(), token_lists = json::array();
  std::map<std::vector<std::string>, size_t> token_index;
  for (const AttentionDump& d : c.in.dumps) {
    steps.push_back(d.step);
    json probes = json::array();
    for (const Probe& p : d.probes) {
      auto [it, added] = token_index.emplace(p.tokens, token_index.size());
      if (added) token_lists.push_back(p.tokens);
      json maps = json::array();
      for (const std::vector<const HeadMap*>& layer : maps_by_layer(p))
        for (const HeadMap* m : layer) maps.push_back({m->layer, m->head, lower_triangle_base64(m->weights)});
      probes.push_back({{"tokens", it->second}, {"maps", std::move(maps)}});
    }
    dumps.push_back({{"probes", std::move(probes)}});
  }
  json seq = json::array();
  for (int k = 0; k <= 100; ++k) seq.push_back(sequential_colour(k / 100.0));
  json hist = json::array();
  for (const AttentionDump& d : c.in.dumps) {
    json by_head = json::object();
    for (const HeadScoresFile& f : c.history) {
      if (f.step != d.step) continue;
      for (const HeadScores& h : f.heads) {
        auto val = [](double v) {
          return std::isfinite(v) ? json(std::round(v * 1000) / 1000) : json(nullptr);
        };
        by_head[std::to_string(h.layer) + "," + std::to_string(h.head)] = {
            {"task", val(h.task)},
            {"previous_token", val(h.previous_token)},
            {"induction", val(h.induction)},
            {"first_token", val(h.first_token)},
            {"duplicate_token", val(h.duplicate_token)}};
      }
    }
    hist.push_back(std::move(by_head));
  }
  return {{"steps", std::move(steps)},
          {"tokens", std::move(token_lists)},
          {"dumps", std::move(dumps)},
          {"seq", std::move(seq)},
          {"history", std::move(hist)}};
}

}  // namespace

std::string report_html(const ReportInputs& in) {
  const std::string title = in.title.empty() ? "attograd run" : in.title;
  const ReportContext c = make_context(in);

  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + xml_escape(title) + " \u2014 attograd report</title>\n<style>\n" +
         std::string(report_css()) + "</style>\n";
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

  std::string nav = "<nav class=\"sections\" aria-label=\"sections\">", body;
  for (const ReportSection& s : kSections) {
    const std::string html = s.body(c);
    if (html.empty()) continue;
    nav += std::string("<a href=\"#") + s.id + "\">" + s.title + "</a>";
    body += std::string("<section id=\"") + s.id + "\"><h2>" + s.title + "</h2>\n" + html + "</section>\n";
  }
  out += nav + "</nav>\n" + body;
  out += "<script type=\"application/json\" id=\"attograd-data\">" +
         script_safe(viewer_data(c).dump(-1, ' ', false, json::error_handler_t::replace)) + "</script>\n";
  // report.js draws the attention viewer from the data above and wires the charts' cursor and readouts.
  out += "<script>\n" + std::string(report_js()) + "</script>\n</body></html>\n";
  return out;
}

void write_report_html(const std::string& path, const ReportInputs& inputs) {
  io::write_text_file_atomically(path, report_html(inputs));
}

}  // namespace findings
