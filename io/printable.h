// Text from outside (file names, JSON keys, --set values, tokens) as an error line may quote it: control
// bytes (newlines, escape sequences) and bytes that are not valid UTF-8 are written as \xNN, so an error
// stays one line and cannot drive the terminal. Valid UTF-8 passes unchanged.
#pragma once

#include <string>
#include <string_view>

namespace io {

std::string printable(std::string_view text);

// Whether `text` is valid UTF-8 without control bytes (tab excepted): what a name, a path or a token
// written into the run folder's JSON and shown on a terminal may hold.
bool is_printable_utf8(std::string_view text);

}  // namespace io
