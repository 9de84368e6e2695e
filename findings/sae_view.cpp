#include "findings/sae_view.h"

#include <algorithm>
#include <cstdio>

#include "findings/report_assets.h"
#include "findings/svg_heatmap.h"

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

std::string sae_features_html(const std::string& title, const json& eval,
                              const std::vector<SaeFeature>& features) {
  std::string h =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
      "</title>\n<style>" + std::string(report_css()) +
      "\n.tok{display:inline-block;padding:0 1px;margin:0 1px;font-family:monospace;white-space:pre}"
      "\n.feat{border-top:1px solid #ccc;margin-top:1em}</style></head><body>\n<h1>" +
      xml_escape(title) + "</h1>\n<table>";
  for (const auto& item : eval.items()) {
    if (item.value().is_structured()) continue;
    h += "<tr><th>" + xml_escape(item.key()) + "</th><td>" + xml_escape(item.value().dump()) + "</td></tr>";
  }
  h += "</table>\n";
  std::vector<const SaeFeature*> order;
  for (const SaeFeature& f : features)
    if (!f.examples.empty()) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const SaeFeature* a, const SaeFeature* b) { return a->density > b->density; });
  char buf[160];
  for (const SaeFeature* f : order) {
    std::snprintf(buf, sizeof buf, "<div class=\"feat\"><h3>feature %lld</h3><p>density %.3g",
                  static_cast<long long>(f->index), f->density);
    h += buf;
    auto list = [&](const char* label, const std::vector<std::pair<std::string, float>>& v) {
      h += std::string("; ") + label + ":";
      for (const auto& [tok, val] : v) {
        std::snprintf(buf, sizeof buf, " %.2f", val);
        h += " <code>" + xml_escape(tok) + "</code>" + buf;
      }
    };
    list("promotes", f->promoted);
    list("suppresses", f->suppressed);
    h += "</p>\n";
    for (const SaeExample& e : f->examples) {
      h += "<div>";
      for (size_t t = 0; t < e.tokens.size(); ++t) {
        const float a = e.max > 0 ? std::clamp(e.acts[t] / e.max, 0.f, 1.f) : 0.f;
        std::snprintf(buf, sizeof buf,
                      "<span class=\"tok\" style=\"background:rgba(255,120,0,%.2f)\" title=\"%.3g\">", a,
                      e.acts[t]);
        h += buf + xml_escape(e.tokens[t]) + "</span>";
      }
      std::snprintf(buf, sizeof buf, " <small>max %.3g at %d</small></div>\n", e.max, e.position);
      h += buf;
    }
    h += "</div>\n";
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace findings
