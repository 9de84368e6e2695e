#include "io/json_error.h"

#include <stdexcept>

namespace io {

void json_error(const std::string& source, const std::string& pointer, const std::string& what) {
  std::string line = source + ": " + (pointer.empty() ? "/" : pointer) + ": " + what;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  throw std::runtime_error(line);
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    json_error(source, "", std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace io
