// The one way a reader of the project's JSON files reports a problem: one line, "SOURCE: POINTER: WHAT",
// where SOURCE is the file (and line, for JSON Lines) and POINTER the JSON pointer of the bad field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace io {

// Throws std::runtime_error("SOURCE: POINTER: WHAT"); an empty pointer reads as "/" (the whole document).
[[noreturn]] void json_error(const std::string& source, const std::string& pointer, const std::string& what);

// Parses `text` as JSON; a syntax error becomes one line naming `source` (nlohmann's message has no newline
// added, and the bytes it quotes are escaped).
nlohmann::json parse_json(const std::string& text, const std::string& source);

}  // namespace io
