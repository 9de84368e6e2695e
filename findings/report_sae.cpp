// The report's SAE section (see report_sae.h).
#include "findings/report_sae.h"

#include <cctype>
#include <cmath>

#include "findings/svg_heatmap.h"
#include "io/append_format.h"

namespace findings {
namespace {

// A number cell: printf's `format` of v, or a dash where eval.json held null.
std::string num_cell(double v, const char* format) {
  if (!std::isfinite(v)) return "<td class=\"num muted\">&ndash;</td>";
  std::string out = "<td class=\"num\">";
  io::append_format(out, format, v);
  return out + "</td>";
}

}  // namespace

std::string report_sae_section(const std::vector<SaeEvalSummary>& saes,
                               const std::vector<std::string>& pages) {
  if (saes.empty()) return "";
  std::string out =
      "<p class=\"note\">The sparse autoencoders trained on this run's activations (attograd sae; "
      "docs/sae.md), evaluated on held-out sequences with SAELens's definitions: the reconstruction's mean "
      "squared error and explained variance, L0 (active features per token), dead features (active on no "
      "held-out token), the cross-entropy loss recovered with the SAE spliced in (1: as the model, 0: as "
      "zero-ablating the point) and the KL divergence from the model's output. The density histogram "
      "counts features by the fraction of held-out tokens they fire on: dead (red), then one bar per "
      "decade from [1e-6, 1e-5) to [1e-1, 1]; hover a bar for its count. Each SAE's features, with their "
      "top examples, are on its own page.</p>\n<div class=\"wide\"><table class=\"scores\"><thead><tr>"
      "<th>point</th><th>d_in</th><th>d_sae</th><th>mse</th><th>explained variance</th><th>L0</th>"
      "<th>dead</th><th>CE loss recovered</th><th>KL</th><th>feature density</th><th>features</th></tr>"
      "</thead><tbody>";
  for (size_t i = 0; i < saes.size(); ++i) {
    const SaeEvalSummary& s = saes[i];
    io::append_format(out, "<tr><td>%s</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>",
                      xml_escape(s.point).c_str(), static_cast<long long>(s.d_in),
                      static_cast<long long>(s.d_sae));
    out += num_cell(s.mse, "%.4g") + num_cell(s.explained_variance, "%.4f") + num_cell(s.l0, "%.2f");
    io::append_format(out, "<td class=\"num\">%lld</td>", static_cast<long long>(s.dead));
    out += num_cell(s.ce_loss_recovered, "%.4f") + num_cell(s.kl, "%.4g");
    out += "<td>" + sae_density_svg(s.density_bins, s.density_counts) + "</td>";
    const std::string page = i < pages.size() ? pages[i] : std::string();
    out += page.empty() ? "<td class=\"muted\">&ndash;</td>"
                        : "<td><a href=\"" + url_path(page) + "\">features.html</a></td>";
    out += "</tr>";
  }
  return out + "</tbody></table></div>\n";
}

}  // namespace findings
