// The sweep summary's files (sweep_summary.h). The charts are inline SVG drawn here; the page's only script
// sorts the table when a header is clicked.
#include "findings/sweep_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "findings/chart_scale.h"
#include "findings/svg_heatmap.h"
#include "io/append_format.h"
#include "io/run_layout.h"

namespace findings {
namespace {

using nlohmann::ordered_json;

ordered_json opt(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json best_json(const std::optional<BestHead>& b) {
  if (!b) return nullptr;
  return {{"layer", b->layer}, {"head", b->head}, {"value", b->value}};
}

ordered_json curve_json(const Curve& c) {
  ordered_json out = ordered_json::array();
  for (const auto& [s, v] : c) out.push_back({s, v});
  return out;
}

std::string csv_cell(std::string text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "";
  return ordered_json(*v).dump();
}

std::string setting_value(const ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A chart frame: y axis with ticks over [y0, y1], a title and axis labels; returns the SVG's opening and
// the axes. X/Y map data to pixels.
struct Frame {
  double W, H, L = 60, R = 16, T = 30, B = 64;
  double x0, x1, y0, y1;
  double X(double x) const { return L + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - L - R); }
  double Y(double y) const { return H - B - (y - y0) / (y1 - y0) * (H - T - B); }
  std::string open(const std::string& title, const std::string& y_label) const {
    std::string out;
    io::append_format(out,
                      "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                      "role=\"img\"><text x=\"%.0f\" y=\"18\" class=\"ct\">%s</text>",
                      W, H, W, H, L, xml_escape(title).c_str());
    for (double t : nice_ticks(y0, y1, 5)) {
      io::append_format(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", L,
                        W - R, Y(t), Y(t));
      io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g</text>",
                        L - 6, Y(t) + 4, t);
    }
    io::append_format(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" class=\"axis\"/>", L, W - R,
                      H - B, H - B);
    io::append_format(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" class=\"axis\"/>", L, L, T,
                      H - B);
    io::append_format(out,
                      "<text x=\"14\" y=\"%.0f\" class=\"al\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 14 %.0f)\">%s</text>",
                      (T + H - B) / 2, (T + H - B) / 2, xml_escape(y_label).c_str());
    return out;
  }
};

// One dot per run over categorical x (the settings), for each series; a short bar at each setting's mean.
struct DotSeries {
  std::string name, colour;
  std::optional<double> SweepRunSummary::*field = nullptr;  // or a phase-change step (below)
  std::optional<double> PhaseChange::*phase = nullptr;
};

std::optional<double> value_of(const SweepRunSummary& r, const DotSeries& s) {
  return s.field ? r.*s.field : r.phase_change.*s.phase;
}

std::string dot_chart(const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& settings, const SweepSummary& sum,
                      const std::vector<DotSeries>& series,
                      std::optional<std::pair<double, double>> y_fixed) {
  // A legend entry per series in a row under the title, each as wide as its name.
  std::vector<double> legend_x;
  double legend_end = 60;
  for (const DotSeries& s : series) legend_x.push_back(legend_end), legend_end += 26 + 6.8 * s.name.size();
  Frame f{std::max({series.size() > 1 ? 520.0 : 360.0, 90.0 + 70.0 * settings.size(), legend_end + 16}),
          300,
          60,
          16,
          series.size() > 1 ? 46.0 : 30.0,
          64,
          0,
          0,
          0,
          0};
  f.x0 = -0.5, f.x1 = settings.size() - 0.5;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const SweepRunSummary& r : sum.runs)
    for (const DotSeries& s : series)
      if (r.status == "finished")
        if (auto v = value_of(r, s); v && std::isfinite(*v)) lo = std::min(lo, *v), hi = std::max(hi, *v);
  if (y_fixed) {
    f.y0 = y_fixed->first, f.y1 = y_fixed->second;
  } else {
    f.y0 = 0, f.y1 = std::isfinite(hi) && hi > 0 ? hi * 1.08 : 1;
  }
  std::string out = f.open(title, y_label);
  if (!std::isfinite(lo))
    io::append_format(out,
                      "<text x=\"%.0f\" y=\"%.0f\" class=\"muted\">no values (never reached, or no runs "
                      "finished)</text>",
                      f.L + 10, f.H / 2);
  for (size_t k = 0; k < settings.size(); ++k) {
    const double cx = f.X(double(k));
    io::append_format(out,
                      "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\" "
                      "transform=\"rotate(-30 %.1f %.1f)\">%s</text>",
                      cx, f.H - f.B + 16, cx, f.H - f.B + 16, xml_escape(settings[k]).c_str());
  }
  const double band = (f.X(1) - f.X(0)) * 0.7;
  for (size_t si = 0; si < series.size(); ++si) {
    const DotSeries& s = series[si];
    const double offset = series.size() > 1 ? (si - (series.size() - 1) / 2.0) * band / series.size() : 0;
    if (series.size() > 1) {
      const double lx = legend_x[si], ly = 33;
      io::append_format(out, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4\" fill=\"%s\"/>", lx + 4, ly,
                        s.colour.c_str());
      io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"tick\">%s</text>", lx + 12, ly + 4,
                        xml_escape(s.name).c_str());
    }
    for (size_t k = 0; k < settings.size(); ++k) {
      std::vector<std::pair<double, const SweepRunSummary*>> vals;
      for (const SweepRunSummary& r : sum.runs)
        if (r.setting == settings[k] && r.status == "finished")
          if (auto v = value_of(r, s); v && std::isfinite(*v)) vals.push_back({*v, &r});
      const double cx = f.X(double(k)) + offset;
      double mean = 0;
      for (size_t i = 0; i < vals.size(); ++i) {
        mean += vals[i].first / vals.size();
        // Seeds spread a little sideways so equal values stay visible.
        const double jitter =
            vals.size() > 1 ? (i / double(vals.size() - 1) - 0.5) * band / series.size() * 0.5 : 0;
        io::append_format(
            out,
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.75\"><title>%s: "
            "%g</title></circle>",
            cx + jitter, f.Y(std::clamp(vals[i].first, f.y0, f.y1)), s.colour.c_str(),
            xml_escape(vals[i].second->name).c_str(), vals[i].first);
      }
      if (!vals.empty())
        io::append_format(out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                          "stroke-width=\"2\"/>",
                          cx - band / series.size() * 0.4, cx + band / series.size() * 0.4,
                          f.Y(std::clamp(mean, f.y0, f.y1)), f.Y(std::clamp(mean, f.y0, f.y1)));
    }
  }
  return out + "</svg>";
}

// Every run's curve of one score, one colour per setting.
std::string curve_chart(const std::string& title, const SweepSummary& sum, Curve SweepRunSummary::*curve,
                        const std::map<std::string, size_t>& colour_of) {
  Frame f{440, 270, 60, 16, 30, 44, 0, 0, 0, 1};
  double x1 = 0;
  bool any = false;
  for (const SweepRunSummary& r : sum.runs)
    for (const auto& [s, v] : r.*curve) x1 = std::max(x1, s), any = true;
  f.x1 = x1 > 0 ? x1 : 1;
  std::string out = f.open(title, "best head's score");
  for (double t : nice_ticks(f.x0, f.x1, 5))
    io::append_format(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%g</text>",
                      f.X(t), f.H - f.B + 16, t);
  io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"al\" text-anchor=\"middle\">step</text>",
                    (f.L + f.W - f.R) / 2, f.H - 8);
  io::append_format(out,
                    "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                    "stroke-dasharray=\"4 3\"/>",
                    f.L, f.W - f.R, f.Y(0.5), f.Y(0.5));
  if (!any)
    io::append_format(out, "<text x=\"%.0f\" y=\"%.0f\" class=\"muted\">no scores recorded</text>", f.L + 10,
                      f.H / 2);
  for (const SweepRunSummary& r : sum.runs) {
    if ((r.*curve).empty()) continue;
    io::append_format(out,
                      "<polyline fill=\"none\" stroke-width=\"1.6\" stroke-opacity=\"0.8\" stroke=\"%s\" "
                      "points=\"",
                      category_colour(colour_of.at(r.setting)));
    for (const auto& [s, v] : r.*curve)
      io::append_format(out, "%.1f,%.1f ", f.X(s), f.Y(std::clamp(v, 0.0, 1.0)));
    io::append_format(out, "\"><title>%s</title></polyline>", xml_escape(r.name).c_str());
  }
  return out + "</svg>";
}

std::string cell(const std::optional<double>& v, int decimals) {
  if (!v || !std::isfinite(*v)) return "<td class=\"num muted\" data-v=\"\">&ndash;</td>";
  std::string out;
  io::append_format(out, "<td class=\"num\" data-v=\"%.17g\">%.*f</td>", *v, decimals, *v);
  return out;
}

std::string best_cell(const std::optional<BestHead>& b) {
  if (!b) return "<td class=\"num muted\" data-v=\"\">&ndash;</td>";
  std::string out;
  io::append_format(out, "<td class=\"num%s\" data-v=\"%.17g\">%.3f <span class=\"muted\">L%dH%d</span></td>",
                    b->value >= 0.5 ? " hi" : "", b->value, b->value, b->layer, b->head);
  return out;
}

constexpr const char* kCss = R"CSS(
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;margin:24px 32px;color:#1a1a1a;background:#fff}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.muted{color:#777}.row{display:flex;flex-wrap:wrap;gap:16px}p.note{font-size:13px;color:#555;max-width:1000px;overflow-wrap:anywhere}
.chart{border:1px solid #eee;background:#fff}.chart .ct{font-size:13px;font-weight:bold;fill:#222}
.chart .tick{font-size:11px;fill:#444}.chart .al{font-size:12px;fill:#333}.chart .grid{stroke:#eee}
.chart .axis{stroke:#555}.chart .muted{fill:#777;font-size:12px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px}
th{background:#f5f5f5;font-weight:600;cursor:pointer;user-select:none;white-space:nowrap}
th.sorted-asc::after{content:" \25b2"}th.sorted-desc::after{content:" \25bc"}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.hi{font-weight:bold}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:12px;margin:6px 0}
.sw{display:inline-block;width:14px;height:4px;vertical-align:middle;margin-right:4px}
)CSS";

// Click a header to sort by it (numbers by value, blanks last); click again to reverse.
constexpr const char* kJs = R"JS(
(function () {
  'use strict';
  var table = document.getElementById('runs'), body = table.tBodies[0];
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('sorted-asc');
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        if (x === null) x = a.cells[col].textContent;
        if (y === null) y = b.cells[col].textContent;
        if (x === '' || y === '') return (x === '') - (y === '');
        var nx = parseFloat(x), ny = parseFloat(y), c;
        c = (!isNaN(nx) && !isNaN(ny) && String(nx) !== 'NaN') ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  document.body.setAttribute('data-rendered', 'yes');
})();
)JS";

}  // namespace

nlohmann::ordered_json sweep_summary_to_json(const SweepSummary& sum) {
  ordered_json runs = ordered_json::array();
  for (const SweepRunSummary& r : sum.runs) {
    runs.push_back({{"name", r.name},
                    {"settings", r.settings},
                    {"setting", r.setting},
                    {"status", r.status},
                    {"step", r.step},
                    {"steps", r.steps},
                    {"train_loss", opt(r.train_loss)},
                    {"eval_loss", opt(r.eval_loss)},
                    {"eval_acc", opt(r.eval_acc)},
                    {"wall_seconds", opt(r.wall_seconds)},
                    {"tokens_per_s", opt(r.tokens_per_s)},
                    {"best",
                     {{"task", best_json(r.task)},
                      {"previous_token", best_json(r.previous_token)},
                      {"induction", best_json(r.induction)},
                      {"first_token", best_json(r.first_token)},
                      {"duplicate_token", best_json(r.duplicate_token)}}},
                    {"phase_change",
                     {{"induction", opt(r.phase_change.induction)},
                      {"task", opt(r.phase_change.task)},
                      {"previous_token", opt(r.phase_change.previous_token)},
                      {"eval_loss_fastest_fall", opt(r.phase_change.eval_loss_fall)}}},
                    {"curves",
                     {{"task", curve_json(r.task_curve)},
                      {"previous_token", curve_json(r.previous_token_curve)},
                      {"induction", curve_json(r.induction_curve)}}},
                    {"report", io::layout::report_html(r.name)}});
  }
  return {{"out", sum.title}, {"base", sum.base}, {"grid", sum.grid}, {"runs", std::move(runs)}};
}

std::string sweep_summary_csv(const SweepSummary& sum) {
  std::vector<std::string> keys;
  for (const auto& item : sum.grid.items()) keys.push_back(item.key());
  std::string out = "name";
  for (const std::string& k : keys) out += "," + csv_cell(k);
  out +=
      ",status,step,train_loss,eval_loss,eval_acc,wall_seconds,tokens_per_s,best_task_head,best_task,"
      "best_previous_token_head,best_previous_token,best_induction_head,best_induction,best_first_token_head,"
      "best_first_token,best_duplicate_token_head,best_duplicate_token,phase_induction,phase_task,"
      "phase_previous_token,phase_eval_loss_fastest_fall\n";
  const auto best = [](const std::optional<BestHead>& b) {
    if (!b) return std::string(",");
    return "L" + std::to_string(b->layer) + "H" + std::to_string(b->head) + "," +
           ordered_json(b->value).dump();
  };
  for (const SweepRunSummary& r : sum.runs) {
    out += csv_cell(r.name);
    for (const std::string& k : keys)
      out += "," + (r.settings.contains(k) ? csv_cell(setting_value(r.settings[k])) : std::string());
    out += "," + r.status + "," + std::to_string(r.step) + "," + number(r.train_loss) + "," +
           number(r.eval_loss) + "," + number(r.eval_acc) + "," + number(r.wall_seconds) + "," +
           number(r.tokens_per_s) + "," + best(r.task) + "," + best(r.previous_token) + "," +
           best(r.induction) + "," + best(r.first_token) + "," + best(r.duplicate_token) + "," +
           number(r.phase_change.induction) + "," + number(r.phase_change.task) + "," +
           number(r.phase_change.previous_token) + "," + number(r.phase_change.eval_loss_fall) + "\n";
  }
  return out;
}

std::string sweep_index_html(const SweepSummary& sum) {
  std::vector<std::string> keys, settings;
  for (const auto& item : sum.grid.items()) keys.push_back(item.key());
  std::map<std::string, size_t> colour_of;
  for (const SweepRunSummary& r : sum.runs)
    if (colour_of.emplace(r.setting, settings.size()).second) settings.push_back(r.setting);
  size_t finished = 0;
  for (const SweepRunSummary& r : sum.runs) finished += r.status == "finished";

  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         xml_escape(sum.title) + " \u2014 attograd sweep</title>\n<style>" + kCss +
         "</style>\n</head><body>\n";
  out += "<h1>Sweep " + xml_escape(sum.title) + "</h1>\n<p class=\"note\">";
  io::append_format(out, "%zu runs (%zu finished) of <code>%s</code> over ", sum.runs.size(), finished,
                    xml_escape(sum.base).c_str());
  for (size_t k = 0; k < keys.size(); ++k) {
    std::string values;
    for (const auto& v : sum.grid[keys[k]]) values += (values.empty() ? "" : ", ") + setting_value(v);
    out += (k ? " &times; " : "") + std::string("<code>") + xml_escape(keys[k]) + "</code> {" +
           xml_escape(values) + "}";
  }
  out +=
      ". A setting is one point of the grid without its seed; each dot is one finished run, the bar "
      "their mean; a run whose score never reached 0.5 has no phase-change dot.</p>\n";

  out += "<h2>Per setting</h2>\n<div class=\"row\">";
  out += dot_chart("final held-out exact-match accuracy", "accuracy", settings, sum,
                   {{"accuracy", "#2ca02c", &SweepRunSummary::eval_acc, nullptr}}, std::make_pair(0.0, 1.0));
  out += dot_chart("phase-change step (best head first at 0.5)", "step", settings, sum,
                   {{"induction", "#d62728", nullptr, &PhaseChange::induction},
                    {"previous token", "#1f77b4", nullptr, &PhaseChange::previous_token},
                    {"task", "#9467bd", nullptr, &PhaseChange::task},
                    {"held-out loss falls fastest", "#7f7f7f", nullptr, &PhaseChange::eval_loss_fall}},
                   std::nullopt);
  out +=
      "</div>\n<h2>Scores over training</h2>\n<p class=\"note\">The best head's score at each attention "
      "dump, every run overlaid, one colour per setting; the dashed line is 0.5.</p>\n<div class=\"legend\">";
  for (size_t k = 0; k < settings.size(); ++k)
    io::append_format(out, "<span><span class=\"sw\" style=\"background:%s\"></span>%s</span>",
                      category_colour(k), xml_escape(settings[k]).c_str());
  out += "</div>\n<div class=\"row\">";
  out += curve_chart("induction score", sum, &SweepRunSummary::induction_curve, colour_of);
  out += curve_chart("previous-token score", sum, &SweepRunSummary::previous_token_curve, colour_of);
  out += curve_chart("task score", sum, &SweepRunSummary::task_curve, colour_of);
  out += "</div>\n";

  out +=
      "<h2>Runs</h2>\n<p class=\"note\">Click a header to sort; a name opens the run's report. Best head: "
      "the highest score of its kind at the end, with its layer and head. Phase change: the step at which "
      "the "
      "best head's score first reached 0.5 (interpolated between dumps).</p>\n";
  out += "<div style=\"overflow-x:auto\"><table id=\"runs\"><thead><tr><th>run</th>";
  for (const std::string& k : keys) out += "<th>" + xml_escape(k) + "</th>";
  out +=
      "<th>status</th><th>step</th><th>train loss</th><th>eval loss</th><th>eval acc</th><th>wall s</th>"
      "<th>tokens/s</th><th>task</th><th>prev token</th><th>induction</th><th>first token</th>"
      "<th>dup token</th>"
      "<th>induction step</th><th>prev-token step</th><th>task step</th><th>loss-fall "
      "step</th></tr></thead><tbody>\n";
  for (const SweepRunSummary& r : sum.runs) {
    out += "<tr><td><a href=\"" + xml_escape(io::layout::report_html(r.name)) + "\">" + xml_escape(r.name) +
           "</a></td>";
    for (const std::string& k : keys) {
      const ordered_json v = r.settings.contains(k) ? r.settings[k] : ordered_json();
      const std::string text = setting_value(v);
      if (v.is_number())
        out += "<td class=\"num\" data-v=\"" + text + "\">" + xml_escape(text) + "</td>";
      else
        out += "<td>" + xml_escape(text) + "</td>";
    }
    out += "<td>" + xml_escape(r.status) + "</td>" + cell(double(r.step), 0) + cell(r.train_loss, 4) +
           cell(r.eval_loss, 4) + cell(r.eval_acc, 4) + cell(r.wall_seconds, 1) + cell(r.tokens_per_s, 0) +
           best_cell(r.task) + best_cell(r.previous_token) + best_cell(r.induction) +
           best_cell(r.first_token) + best_cell(r.duplicate_token) + cell(r.phase_change.induction, 0) +
           cell(r.phase_change.previous_token, 0) + cell(r.phase_change.task, 0) +
           cell(r.phase_change.eval_loss_fall, 0) + "</tr>\n";
  }
  out += "</tbody></table></div>\n<script>" + std::string(kJs) + "</script>\n</body></html>\n";
  return out;
}

}  // namespace findings
