// The one way a reader of the project's JSON files reports a problem: one line, "SOURCE: POINTER: WHAT",
// where SOURCE is the file (and line, for JSON Lines) and POINTER the JSON pointer of the bad field; and
// the checked lookups every such reader needs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace io {

// Throws io::JsonError("SOURCE: POINTER: WHAT") (io/json_read.h); an empty pointer reads as "/" (the whole
// document).
[[noreturn]] void json_error(const std::string& source, const std::string& pointer, const std::string& what);

// Parses `text` as JSON through the one bounded reader (io/json_read.h's parse_json_text: nesting, NUL
// bytes and duplicate keys refused); errors are an io::JsonError "SOURCE: line L, column C: ..." or
// "SOURCE: /POINTER: duplicate key".
nlohmann::json parse_json(const std::string& text, const std::string& source);
// The file at `path`, read and parsed; errors name the path.
nlohmann::json read_json_file(const std::string& path);

// The member `key` of the object `obj` found at `pointer`; missing: "missing required key "KEY"".
const nlohmann::json& json_member(const nlohmann::json& obj, const char* key, const std::string& source,
                                  const std::string& pointer);
// `j` as an integer >= 0; otherwise "expected a non-negative integer, got -1" (the number, or the type).
int64_t json_nonnegative_integer(const nlohmann::json& j, const std::string& source,
                                 const std::string& pointer);
// `j` itself when it is an array; otherwise "expected an array, got TYPE".
const nlohmann::json& json_array(const nlohmann::json& j, const std::string& source,
                                 const std::string& pointer);

}  // namespace io
