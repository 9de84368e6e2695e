// An SAE's features.json, features.html, eval.json read back, and the density histogram (see sae_view.h).
// features.html is plain HTML (no script): a 1024-feature SAE's page stays a few MB because each example
// is a window around its peak, and a token is a bare <i> element whose shade is a class, not a style.
#include "findings/sae_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "findings/report_assets.h"
#include "findings/svg_heatmap.h"
#include "io/append_format.h"
#include "io/json_error.h"

namespace findings {

using json = nlohmann::json;

json sae_features_to_json(const std::vector<SaeFeature>& features) {
  json out = json::array();
  for (const SaeFeature& f : features) {
    json ex = json::array();
    for (const SaeExample& e : f.examples)
      ex.push_back({{"sequence", e.sequence},
                    {"position", e.position},
                    {"max", e.max},
                    {"tokens", e.tokens},
                    {"acts", e.acts}});
    auto pairs = [](const std::vector<std::pair<std::string, float>>& v) {
      json a = json::array();
      for (const auto& [tok, val] : v) a.push_back({{"token", tok}, {"logit", val}});
      return a;
    };
    out.push_back({{"index", f.index},
                   {"density", f.density},
                   {"examples", ex},
                   {"promoted", pairs(f.promoted)},
                   {"suppressed", pairs(f.suppressed)}});
  }
  return out;
}

namespace {

// The page's own rules, after the report's stylesheet: a token is an <i> (the peak a <b>) inside an
// example's <div class="ex">, shaded by its class a1..a8 (activation over the peak, in eighths).
std::string page_css() {
  std::string css =
      ".feat{border-top:1px solid #ccc;margin-top:1em}.ex{margin:3px 0;line-height:1.8}"
      ".ex i,.ex b{font-style:normal;font-weight:normal;display:inline-block;padding:0 1px;margin:0 1px;"
      "font-family:monospace;white-space:pre}.ex b{outline:1.5px solid #222}.ex small{color:#777}";
  for (int k = 1; k <= kSaeShades; ++k)
    io::append_format(css, ".a%d{background:rgba(255,120,0,%.3g)}", k, double(k) / kSaeShades);
  return css;
}

// The shade step of an activation: 0 when it is not positive, else ceil(act / peak * kSaeShades).
int shade_of(float act, float peak) {
  if (!(act > 0) || !(peak > 0)) return 0;
  return std::clamp(static_cast<int>(std::ceil(act / peak * kSaeShades)), 1, kSaeShades);
}

// One token: <i> (the peak <b>), its shade as a class, its activation (3 significant digits) as a tooltip
// when it has one. The attribute values are numbers and a class name, so they need no quotes.
void append_token(std::string& h, const std::string& token, float act, float peak, bool is_peak) {
  const int shade = shade_of(act, peak);
  h += is_peak ? "<b" : "<i";
  if (shade > 0) io::append_format(h, " class=a%d", shade);
  if (act != 0 || is_peak) io::append_format(h, " title=%.3g", act);
  h += ">" + xml_escape(token) + (is_peak ? "</b>" : "</i>");
}

void append_example(std::string& h, const SaeExample& e) {
  h += "<div class=ex>";
  const int n = static_cast<int>(e.tokens.size());
  if (n > 0) {
    const int peak = std::clamp(e.position, 0, n - 1);
    const int first = std::max(0, peak - kSaeWindowBefore), last = std::min(n - 1, peak + kSaeWindowAfter);
    if (first > 0) h += "&hellip;";
    for (int t = first; t <= last; ++t)
      append_token(h, e.tokens[t], t < static_cast<int>(e.acts.size()) ? e.acts[t] : 0.f, e.max, t == peak);
    if (last < n - 1) h += "&hellip;";
  }
  io::append_format(h, " <small>max %.3g at %d</small></div>\n", e.max, e.position);
}

double number_or_null(const json& j, const char* key, const std::string& source) {
  const json& v = io::json_member(j, key, source, "");
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number())
    io::json_error(source, std::string("/") + key,
                   std::string("expected a number or null, got ") + v.type_name());
  return v.get<double>();
}

}  // namespace

std::string sae_features_html(const std::string& title, const json& eval,
                              const std::vector<SaeFeature>& features) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      xml_escape(title) + "</title>\n<style>\n" + std::string(report_css()) + page_css() +
      "\n</style></head><body>\n<h1>" + xml_escape(title) + "</h1>\n<table class=\"scores\">";
  for (const auto& item : eval.items()) {
    if (item.value().is_structured()) continue;
    const json& v = item.value();
    h += "<tr><th>" + xml_escape(item.key()) + "</th><td class=\"num\">" +
         xml_escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</td></tr>";
  }
  h += "</table>\n";
  const json hist = eval.is_object() ? eval.value("density_histogram", json()) : json();
  if (hist.is_object() && hist.value("bins", json()).is_array() && hist.value("counts", json()).is_array()) {
    std::vector<std::string> bins;
    std::vector<int64_t> counts;
    for (const json& b : hist["bins"]) bins.push_back(b.is_string() ? b.get<std::string>() : b.dump());
    for (const json& c : hist["counts"]) counts.push_back(c.is_number_integer() ? c.get<int64_t>() : 0);
    h += "<p>feature density: " + sae_density_svg(bins, counts) + "</p>\n";
  }
  std::vector<const SaeFeature*> order;
  for (const SaeFeature& f : features)
    if (!f.examples.empty()) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const SaeFeature* a, const SaeFeature* b) { return a->density > b->density; });
  io::append_format(h,
                    "<p class=\"note\">%zu of %zu features fired on the held-out sequences; they follow, "
                    "densest first. Each example is a window of its held-out sequence around the token "
                    "where the feature peaks (boxed): up to %d tokens before it and %d after "
                    "(&hellip; marks a cut; features.json holds the whole sequence). A token's shade is "
                    "its activation over the example's peak, in %d steps:",
                    order.size(), features.size(), kSaeWindowBefore, kSaeWindowAfter, kSaeShades);
  h += " <span class=ex>";
  for (int k = 1; k <= kSaeShades; ++k) io::append_format(h, "<i class=a%d>&le;%d/%d</i>", k, k, kSaeShades);
  h += "</span>. Hover a token for its activation.</p>\n";
  for (const SaeFeature* f : order) {
    io::append_format(h, "<div class=feat id=feature-%lld><h3>feature %lld</h3><p>density %.3g",
                      static_cast<long long>(f->index), static_cast<long long>(f->index), f->density);
    auto list = [&](const char* label, const std::vector<std::pair<std::string, float>>& v) {
      h += std::string("; ") + label + ":";
      for (const auto& [tok, val] : v) {
        h += " <code>" + xml_escape(tok) + "</code>";
        io::append_format(h, " %.2f", val);
      }
    };
    list("promotes", f->promoted);
    list("suppresses", f->suppressed);
    h += "</p>\n";
    for (const SaeExample& e : f->examples) append_example(h, e);
    h += "</div>\n";
  }
  h += "</body></html>\n";
  return h;
}

const std::vector<std::string>& sae_density_bins() {
  static const std::vector<std::string> bins = {"dead",        "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)",
                                                "[1e-3,1e-2)", "[1e-2,1e-1)", "[1e-1,1]"};
  return bins;
}

json sae_eval_to_json(const SaeEvalSummary& e) {
  return json{{"point", e.point},
              {"d_in", e.d_in},
              {"d_sae", e.d_sae},
              {"tokens", e.tokens},
              {"mse", e.mse},
              {"explained_variance", e.explained_variance},
              {"l0", e.l0},
              {"dead", e.dead},
              {"density_histogram", {{"bins", e.density_bins}, {"counts", e.density_counts}}},
              {"ce_clean", e.ce_clean},
              {"ce_with_sae", e.ce_with_sae},
              {"ce_zero_ablation", e.ce_zero_ablation},
              {"ce_loss_recovered", e.ce_loss_recovered},
              {"kl", e.kl}};
}

std::string sae_eval_table(const SaeEvalSummary& e) {
  std::string out;
  io::append_format(out, "SAE at %s: d_in %lld, d_sae %lld, %lld held-out tokens\n", e.point.c_str(),
                    static_cast<long long>(e.d_in), static_cast<long long>(e.d_sae),
                    static_cast<long long>(e.tokens));
  io::append_format(out, "mse %.6g  explained variance %.4f  L0 %.2f  dead %lld\n", e.mse,
                    e.explained_variance, e.l0, static_cast<long long>(e.dead));
  io::append_format(out, "CE clean %.4f  with SAE %.4f  zero-ablated %.4f  recovered %.4f  KL %.5f\n",
                    e.ce_clean, e.ce_with_sae, e.ce_zero_ablation, e.ce_loss_recovered, e.kl);
  return out;
}

json sae_synthetic_to_json(const SaeSyntheticResult& r) {
  return {{"mean_max_cos", r.mean_max_cos},
          {"mcc", r.mcc},
          {"l0", r.l0},
          {"dead", r.dead},
          {"seconds", r.seconds}};
}

std::string sae_synthetic_table(const SaeSyntheticResult& r) {
  std::string out;
  io::append_format(out, "%lld features in %lld dims, p %g; SAE of %lld features, %lld steps:\n",
                    static_cast<long long>(r.features), static_cast<long long>(r.dim), r.p,
                    static_cast<long long>(r.d_sae), static_cast<long long>(r.steps));
  io::append_format(out, "mean max cos %.4f  MCC %.4f  L0 %.2f  dead %lld  (%.1f s)\n", r.mean_max_cos, r.mcc,
                    r.l0, static_cast<long long>(r.dead), r.seconds);
  return out;
}

SaeEvalSummary sae_eval_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "", std::string("expected an object, got ") + j.type_name());
  SaeEvalSummary s;
  const json& point = io::json_member(j, "point", source, "");
  if (!point.is_string())
    io::json_error(source, "/point", std::string("expected a string, got ") + point.type_name());
  s.point = point.get<std::string>();
  const auto count = [&](const char* key) {
    return io::json_nonnegative_integer(io::json_member(j, key, source, ""), source, std::string("/") + key);
  };
  s.d_in = count("d_in");
  s.d_sae = count("d_sae");
  s.dead = count("dead");
  s.mse = number_or_null(j, "mse", source);
  s.explained_variance = number_or_null(j, "explained_variance", source);
  s.l0 = number_or_null(j, "l0", source);
  s.ce_loss_recovered = number_or_null(j, "ce_loss_recovered", source);
  s.kl = number_or_null(j, "kl", source);
  s.tokens = count("tokens");
  s.ce_clean = number_or_null(j, "ce_clean", source);
  s.ce_with_sae = number_or_null(j, "ce_with_sae", source);
  s.ce_zero_ablation = number_or_null(j, "ce_zero_ablation", source);
  const std::string hp = "/density_histogram";
  const json& hist = io::json_member(j, "density_histogram", source, "");
  if (!hist.is_object())
    io::json_error(source, hp, std::string("expected an object, got ") + hist.type_name());
  const json& bins = io::json_array(io::json_member(hist, "bins", source, hp), source, hp + "/bins");
  const json& counts = io::json_array(io::json_member(hist, "counts", source, hp), source, hp + "/counts");
  for (size_t i = 0; i < bins.size(); ++i) {
    if (!bins[i].is_string())
      io::json_error(source, hp + "/bins/" + std::to_string(i),
                     std::string("expected a string, got ") + bins[i].type_name());
    s.density_bins.push_back(bins[i].get<std::string>());
  }
  for (size_t i = 0; i < counts.size(); ++i)
    s.density_counts.push_back(
        io::json_nonnegative_integer(counts[i], source, hp + "/counts/" + std::to_string(i)));
  if (counts.size() != bins.size())
    io::json_error(source, hp + "/counts",
                   "expected one count per bin (" + std::to_string(bins.size()) + "), got " +
                       std::to_string(counts.size()));
  return s;
}

std::string sae_density_svg(const std::vector<std::string>& bins, const std::vector<int64_t>& counts) {
  const size_t n = std::min(bins.size(), counts.size());
  const double bar = 12, gap = 2, H = 32, pad = 1;
  const double W = 2 * pad + n * (bar + gap) - (n > 0 ? gap : 0);
  int64_t top = 1;
  for (size_t i = 0; i < n; ++i) top = std::max(top, counts[i]);
  std::string label = "feature density:";
  for (size_t i = 0; i < n; ++i) label += (i ? ", " : " ") + bins[i] + " " + std::to_string(counts[i]);
  std::string out;
  io::append_format(out,
                    "<svg class=\"density\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                    "role=\"img\" aria-label=\"%s\">",
                    W, H, W, H, xml_escape(label).c_str());
  for (size_t i = 0; i < n; ++i) {
    const double x = pad + i * (bar + gap);
    const double h = counts[i] > 0 ? std::max(1.0, double(counts[i]) / top * (H - 2 * pad)) : 0.0;
    // A bar, over a full-height transparent one so that an empty bin has a tooltip too.
    io::append_format(out,
                      "<g><title>%s: %lld</title><rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
                      "fill=\"#f3f3f3\"/><rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" "
                      "fill=\"%s\"/></g>",
                      xml_escape(bins[i]).c_str(), static_cast<long long>(counts[i]), x, pad, bar,
                      H - 2 * pad, x, H - pad - h, bar, h, bins[i] == "dead" ? "#d62728" : "#1f77b4");
  }
  return out + "</svg>";
}

}  // namespace findings
