// printf into a growing string: the SVG pictures and the HTML report are each built in one buffer, with no
// stream per element.
#pragma once

#include <string>

namespace io {

// Appends the printf-formatted text to `out` (any length; nothing when the format fails).
void append_format(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace io
