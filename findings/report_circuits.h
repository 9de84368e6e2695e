// The run report's "Circuits" and "Activation patching" sections (report_html appends them): tables of the
// numbers and the same SVG pictures as the run folder's, embedded as images so their ids stay apart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "findings/circuits_view.h"
#include "findings/lens_view.h"
#include "findings/patching_view.h"

namespace findings {

// An <h2> section; a short note when there are no circuits.
std::string report_circuits_section(const std::optional<CircuitsResult>& circuits);
// An <h2> section with one sub-section per saved logit lens; empty when there are none.
std::string report_lens_section(const std::vector<LensResult>& lenses, const std::vector<std::string>& names);
// An <h2> section with one sub-section per saved patching; empty when there are none.
std::string report_patching_section(const std::vector<PatchingResult>& patchings,
                                    const std::vector<std::string>& names);

}  // namespace findings
