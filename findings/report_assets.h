// The pages' stylesheets and scripts, embedded into the binary at build time (cmake/embed_text.cmake) so
// each page stays one self-contained file: findings/report.{css,js} for report.html, and
// findings/graph_viewer.{css,js} for an attribution graph's graph.html (findings/graph_html.h).
#pragma once

#include <string_view>

namespace findings {

std::string_view report_css();
std::string_view report_js();
std::string_view graph_viewer_css();
std::string_view graph_viewer_js();

}  // namespace findings
