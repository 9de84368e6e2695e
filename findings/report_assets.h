// The report page's stylesheet and script: findings/report.css and findings/report.js, embedded into
// the binary at build time (cmake/embed_text.cmake) so report.html stays one self-contained file.
#pragma once

#include <string_view>

namespace findings {

std::string_view report_css();
std::string_view report_js();

}  // namespace findings
