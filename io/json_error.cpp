#include "io/json_error.h"

#include <stdexcept>

#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/printable.h"

namespace io {
namespace {

// One printable line: control bytes (newlines among them) and bytes that are not UTF-8 escaped, as a
// parse error may quote them from the file.
std::string one_line(const std::string& text) {
  return printable(text);
}

}  // namespace

void json_error(const std::string& source, const std::string& pointer, const std::string& what) {
  throw JsonError(one_line(source + ": " + (pointer.empty() ? "/" : pointer) + ": " + what));
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  return parse_json_text(text, source);
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json(read_text_file(path), path);
}

const nlohmann::json& json_member(const nlohmann::json& obj, const char* key, const std::string& source,
                                  const std::string& pointer) {
  auto it = obj.find(key);
  if (it == obj.end()) json_error(source, pointer, std::string("missing required key \"") + key + "\"");
  return *it;
}

int64_t json_nonnegative_integer(const nlohmann::json& j, const std::string& source,
                                 const std::string& pointer) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return j.get<int64_t>();
  } else if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    return j.get<int64_t>();
  }
  json_error(
      source, pointer,
      "expected a non-negative integer, got " + (j.is_number() ? j.dump() : std::string(j.type_name())));
}

const nlohmann::json& json_array(const nlohmann::json& j, const std::string& source,
                                 const std::string& pointer) {
  if (!j.is_array()) json_error(source, pointer, std::string("expected an array, got ") + j.type_name());
  return j;
}

}  // namespace io
