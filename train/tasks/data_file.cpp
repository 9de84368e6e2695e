#include "train/tasks/data_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "train/task.h"

namespace train {
namespace tasks {

std::shared_ptr<const Tokenizer> load_task_tokenizer(const std::string& path, const std::string& field) {
  try {
    return std::make_shared<const Tokenizer>(Tokenizer::load(path));
  } catch (const TokenizerError& e) {
    throw TaskDataError(field, e.what());
  }
}

std::vector<std::string> tokenizer_token_names(const Tokenizer& tokenizer) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(tokenizer.vocab_size()));
  std::unordered_set<std::string> seen;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    std::string name = bpe_token_name(tokenizer.token_bytes(id));
    if (!seen.insert(name).second) {
      name += "#" + std::to_string(id);
      seen.insert(name);
    }
    names.push_back(std::move(name));
  }
  return names;
}

std::string read_data_file(const std::string& path, int64_t max_bytes, const std::string& field) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw TaskDataError(field, path + ": cannot read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw TaskDataError(field, path + ": expected a regular file (not a folder, FIFO or device)");
  if (st.st_size > max_bytes) {
    throw TaskDataError(field, path + ": " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                   std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TaskDataError(field, path + ": cannot read: " + std::strerror(errno));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  // A file that grew since stat is read up to its size then; one that shrank is an error.
  if (in.gcount() != static_cast<std::streamsize>(text.size()))
    throw TaskDataError(field, path + ": cannot read: the file changed while it was read");
  return text;
}

std::string text_token_name(uint32_t c, bool is_byte) {
  char escaped[16];
  switch (c) {
    case ' ':
      return "\\s";
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    case '\\':
      return "\\\\";
    default:
      break;
  }
  if (c < 0x20 || c == 0x7f || (is_byte && c >= 0x80)) {
    std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned>(c));
    return escaped;
  }
  // Unicode's own white space and invisible characters would be unreadable as names.
  const bool invisible = (c >= 0x80 && c < 0xA0) || c == 0xA0 || c == 0x1680 ||
                         (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || c == 0x205F ||
                         c == 0x3000 || c == 0xFEFF;
  if (invisible) {
    std::snprintf(escaped, sizeof escaped, "\\u{%04X}", static_cast<unsigned>(c));
    return escaped;
  }
  std::string out;
  append_utf8(out, c);
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace tasks
}  // namespace train
