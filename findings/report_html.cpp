// The run report page (see report_html.h). Static parts (curves, score charts, the score table) are
// rendered here as inline SVG/HTML; the attention grid is drawn in the browser from embedded JSON because
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
                             {"first-token score", &HeadScores::first_token},
                             {"duplicate-token score", &HeadScores::duplicate_token}};
  std::string score_charts;
  for (const ScoreKind& kind : kinds) {
    std::vector<Series> lines(head_index.size());
    bool any = false;
    for (const auto& [key, idx] : head_index) {
      lines[idx].name = head_name(key.first, key.second);
      lines[idx].colour = category_colour(idx);
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
            {"first_token", val(h.first_token)},
            {"duplicate_token", val(h.duplicate_token)}};
      }
    }
    hist.push_back(std::move(by_head));
  }
  const json data = {{"dumps", std::move(jd)}, {"seq", std::move(seq)}, {"history", std::move(hist)}};

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
            "scores, and the induction and duplicate-token scores over each probe's own repeated tokens. The "
            "task score needs the "
            "task's ideal keys and appears only in the final table.</p>\n"
          : "<p class=\"note\">Scores at each dumped step, as the trainer computed them.</p>\n";
  if (const auto& pc = in.scores.phase_change) {
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
  out += "</div>\n<div class=\"row\">" +
         (score_charts.empty() ? std::string("<p class=\"muted\">No scores to chart.</p>") : score_charts) +
         "</div>\n";

  io::append_format(out, "<h2>Head scores at step %lld</h2>\n", static_cast<long long>(in.scores.step));
  out +=
      "<p class=\"note\">Mean attention mass per query row (see docs/head-scores.md). Shaded on the weight "
      "scale; bold at 0.5 or more. A map can mislead: read a score together with the ablation columns "
      "(accuracy with the head zeroed or mean-ablated; the lowest is marked).</p>\n";
  out += scores_table(in.scores.heads) + "\n";

  out += report_circuits_section(in.circuits) + report_patching_section(in.patchings, in.patching_names) +
         report_lens_section(in.lenses, in.lens_names);

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
  // report.js draws the selected dump and probe as a grid of panels (rows layers, columns heads), with the
  // same reading order and colours as svg_heatmap.
  out += "<script>\n" + std::string(report_js()) + "</script>\n</body></html>\n";
  return out;
}

void write_report_html(const std::string& path, const ReportInputs& inputs) {
  io::write_text_file_atomically(path, report_html(inputs));
}

}  // namespace findings
