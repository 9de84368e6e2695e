// The run report's "Sparse autoencoders" section (report_html lists it in its section table): one row per
// SAE trained on the run (RUN/sae/POINT/eval.json) with its evaluation's numbers, its feature-density
// histogram as a small inline SVG, and a link to its features.html.
#pragma once

#include <string>
#include <vector>

#include "findings/sae_view.h"

namespace findings {

// A section's body (report_html adds the heading); empty when there are no SAEs. pages[i] is saes[i]'s
// features.html relative to the report (empty: no page, no link).
std::string report_sae_section(const std::vector<SaeEvalSummary>& saes,
                               const std::vector<std::string>& pages);

}  // namespace findings
