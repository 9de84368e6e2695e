// The run report's "Circuits", "Activation patching" and "Logit lens" sections (report_html lists them in
// its section table): tables of the numbers and the same SVG pictures as the run folder's, inline so their
// cells' tooltips work, each picture's ids prefixed so the page's inline SVGs never share one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "findings/circuits_view.h"
#include "findings/lens_view.h"
#include "findings/patching_view.h"

namespace findings {

// A section's body (report_html adds the heading); a short note when there are no circuits.
std::string report_circuits_section(const std::optional<CircuitsResult>& circuits);
// One sub-section per saved logit lens; empty when there are none.
std::string report_lens_section(const std::vector<LensResult>& lenses, const std::vector<std::string>& names);
// One sub-section per saved patching; empty when there are none.
std::string report_patching_section(const std::vector<PatchingResult>& patchings,
                                    const std::vector<std::string>& names);

// A self-contained SVG for inline use in an HTML page: the XML prolog dropped, every id="X" and url(#X)
// renamed to PREFIX-X, labelled for screen readers, in a box that scrolls sideways rather than shrinking
// the picture when the page is narrower.
std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& label);

}  // namespace findings
