#include "findings/utf8_label.h"

namespace findings {
namespace {

// Byte length of the first `cols` code points of s (or all of s).
size_t prefix_bytes(const std::string& s, int cols) {
  size_t i = 0;
  for (int c = 0; i < s.size() && c < cols; ++c) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

}  // namespace

int display_width(const std::string& utf8) {
  int n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

std::string cut_label(const std::string& s, int cols) {
  if (cols <= 0) return "";
  if (display_width(s) <= cols) return s;
  if (cols >= 4) return s.substr(0, prefix_bytes(s, cols - 1)) + "\u2026";
  return s.substr(0, prefix_bytes(s, cols));
}

}  // namespace findings
