#include "io/json_read.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include "io/atomic_file.h"
#include "io/field_table.h"
#include "io/printable.h"

namespace io {
namespace {

// Every error line goes out through here: keys, values and file names from outside are escaped, so the
// line stays one printable line whatever bytes they hold.
JsonError json_read_error(const std::string& message) {
  return JsonError(printable(message));
}

// Thrown by the parse callback; turned into a JsonError once the source is known.
struct Duplicate {
  std::string pointer;
};
struct TooDeep {};

// The byte (0-based) where the nesting first goes deeper than `max_depth`: brackets outside strings
// counted. Called once the parser has refused the depth, so the text up to there is valid JSON.
size_t offset_of_depth(const std::string& text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return i;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return text.size();
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>"; keep
// the detail (at most a short prefix of it: it may quote a long token), since the position is computed
// from the text.
std::string parse_error_detail(const nlohmann::json::parse_error& error) {
  const std::string what = error.what();
  const size_t at = what.find("parse error");
  const size_t colon = what.find(": ", at == std::string::npos ? 0 : at);
  std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
  if (detail.size() > 160) detail = detail.substr(0, 157) + "...";
  return detail;
}

// Parses `text` (no NUL in it); duplicate keys throw Duplicate at the duplicated key's pointer, nesting
// deeper than kMaxJsonDepth throws TooDeep before the deeper container is built; malformed text throws
// nlohmann's parse_error, a number beyond double's range its out_of_range.
template <typename Json>
Json parse_checked(const std::string& text) {
  // One frame per open object or array: an object's keys so far and its current key; an array's index.
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string current_key;
    int index = 0;
  };
  std::vector<Frame> frames;
  const auto pointer_of_open_frames = [&frames]() {
    std::string pointer;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      pointer +=
          frames[i].is_object ? child("", frames[i].current_key) : "/" + std::to_string(frames[i].index);
    }
    return pointer;
  };
  const auto finished_value = [&frames]() {
    if (!frames.empty() && !frames.back().is_object) ++frames.back().index;
  };
  typename Json::parser_callback_t callback = [&](int depth, nlohmann::json::parse_event_t event,
                                                  Json& parsed) {
    switch (event) {
      case nlohmann::json::parse_event_t::object_start:
      case nlohmann::json::parse_event_t::array_start:
        // `depth` counts the containers already open around this one.
        if (depth >= kMaxJsonDepth) throw TooDeep{};
        frames.push_back({event == nlohmann::json::parse_event_t::object_start, {}, {}, 0});
        break;
      case nlohmann::json::parse_event_t::key: {
        Frame& frame = frames.back();
        const std::string key = parsed.template get<std::string>();
        if (!frame.keys.insert(key).second) throw Duplicate{child(pointer_of_open_frames(), key)};
        frame.current_key = key;
        break;
      }
      case nlohmann::json::parse_event_t::object_end:
      case nlohmann::json::parse_event_t::array_end:
        frames.pop_back();
        finished_value();
        break;
      case nlohmann::json::parse_event_t::value:
        finished_value();
        break;
    }
    return true;
  };
  return Json::parse(text, callback);
}

template <typename Json>
Json parse_text(const std::string& text, const std::string& source) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos)
    throw json_read_error(source + ": " + line_and_column(text, nul) + ": a NUL byte, not JSON text");
  try {
    return parse_checked<Json>(text);
  } catch (const nlohmann::json::parse_error& error) {
    const size_t offending = error.byte > 0 ? error.byte - 1 : 0;
    throw json_read_error(source + ": " + line_and_column(text, offending) + ": malformed JSON (" +
                          parse_error_detail(error) + ")");
  } catch (const nlohmann::json::out_of_range& error) {
    // A number beyond double's range ("number overflow parsing '1e400'"): nlohmann gives no position,
    // so point at the first occurrence of the number's text.
    const std::string what = error.what();
    const size_t quote = what.find('\'');
    std::string number = quote == std::string::npos ? "" : what.substr(quote + 1, what.size() - quote - 2);
    const size_t at = number.empty() ? std::string::npos : text.find(number);
    if (number.size() > 40) number = number.substr(0, 37) + "...";
    throw json_read_error(source + ": " + (at == std::string::npos ? "" : line_and_column(text, at) + ": ") +
                          "number " + number + " is out of range");
  } catch (const Duplicate& duplicate) {
    throw json_read_error(source + ": " + shown(duplicate.pointer) + ": duplicate key");
  } catch (const TooDeep&) {
    throw json_read_error(source + ": " + line_and_column(text, offset_of_depth(text, kMaxJsonDepth)) +
                          ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
}

}  // namespace

std::string line_and_column(const std::string& text, size_t offset) {
  const size_t offending = std::min(offset, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offending; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offending - line_start + 1);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  return parse_text<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& source) {
  return parse_text<nlohmann::ordered_json>(text, source);
}

std::optional<nlohmann::json> parse_json_text_if_json(const std::string& text, const std::string& source) {
  // A NUL is neither JSON nor a plain word: refused with the reader's message, wherever it is (a line of a
  // sequences file holding one used to be "not a JSON value", naming no NUL).
  if (text.find('\0') != std::string::npos) (void)parse_text<nlohmann::json>(text, source);
  try {
    return parse_checked<nlohmann::json>(text);
  } catch (const nlohmann::json::parse_error&) {
    return std::nullopt;
  } catch (...) {
    // Too deep, a duplicate key, a number out of range: JSON, refused with the reader's message.
    (void)parse_text<nlohmann::json>(text, source);
    throw;
  }
}

std::string read_json_file_text(const std::string& path, size_t max_bytes, const std::string& what) {
  int fd = -1;
  try {
    fd = open_regular_file(path);  // a FIFO or device is refused rather than read for ever
  } catch (const std::runtime_error& e) {
    throw json_read_error(e.what());
  }
  std::FILE* file = fd < 0 ? nullptr : ::fdopen(fd, "rb");
  if (!file) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw json_read_error(path + ": cannot open (" + std::strerror(error) + ")");
  }
  std::string text;
  char buffer[1 << 14];
  size_t count;
  while (text.size() <= max_bytes && (count = std::fread(buffer, 1, sizeof buffer, file)) > 0)
    text.append(buffer, count);
  const bool failed = std::ferror(file);
  const int error = errno;
  std::fclose(file);
  if (failed) throw json_read_error(path + ": cannot read (" + std::strerror(error) + ")");
  if (text.size() > max_bytes) {
    const std::string size = max_bytes >= (size_t(1) << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                            : std::to_string(max_bytes) + " bytes";
    throw json_read_error(path + ": larger than " + size + ", not " + what);
  }
  return text;
}

nlohmann::json load_json_file(const std::string& path, size_t max_bytes, const std::string& what) {
  return parse_json_text(read_json_file_text(path, max_bytes, what), path);
}

}  // namespace io
