// The one reader of JSON text that comes from outside the program (configs, SAE configs, sweep files, detect
// pattern files, the lines of a sequences file, --set values): bounded in size and in nesting depth, strict
// about what a JSON document is, and reporting every problem in one line that names the source and where.
//
// Refused, each as a JsonError:
//   "SOURCE: line L, column C: malformed JSON (DETAIL)"         syntax, and anything after the top value
//   "SOURCE: line L, column C: a NUL byte, not JSON text"       nlohmann would stop reading at a NUL
//   "SOURCE: line L, column C: nested deeper than 64 levels"    refused by the parser's callback before
//                                                               the value is built, so no recursive
//                                                               dump(), copy or compare ever meets it
//   "SOURCE: /POINTER: duplicate key"                           nlohmann would keep the last one silently
//   "SOURCE: line L, column C: number 1e400 is out of range"    beyond double's range
//   "PATH: larger than 1 MiB, not a config file"               load_json_file's size bound
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace io {

// Any problem of a JSON input, as one printable line naming its source (train::ConfigError derives from it).
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The deepest nesting of objects and arrays accepted: the project's files nest three or four levels.
constexpr int kMaxJsonDepth = 64;
// The size bound of load_json_file: a config is a few hundred bytes (and /dev/zero never ends).
constexpr size_t kMaxJsonFileBytes = size_t(1) << 20;

// Parses `text` as one JSON document with the checks above; errors name `source`.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
// The same, keeping each object's keys in the order written (a sweep's grid is run in that order).
nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& source);

// For text that may be JSON or a plain word (a --set value): nullopt when the text is not JSON (malformed
// or holding a NUL); a JsonError when it is JSON the reader refuses (too deep, a duplicate key, a number out
// of range).
std::optional<nlohmann::json> parse_json_text_if_json(const std::string& text, const std::string& source);

// The bytes of the regular file at `path`, at most `max_bytes` of them: "PATH: cannot open (REASON)",
// "PATH: is a FIFO, not a regular file", "PATH: cannot read (REASON)" and "PATH: larger than 1 MiB, not
// WHAT" (`what`: "a config file") are JsonErrors.
std::string read_json_file_text(const std::string& path, size_t max_bytes = kMaxJsonFileBytes,
                                const std::string& what = "a config file");
// read_json_file_text then parse_json_text, errors naming `path`.
nlohmann::json load_json_file(const std::string& path, size_t max_bytes = kMaxJsonFileBytes,
                              const std::string& what = "a config file");

// "line L, column C" of the byte at `offset` (0-based) in `text`, as the errors above say it.
std::string line_and_column(const std::string& text, size_t offset);

}  // namespace io
