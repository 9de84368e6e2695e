#include "train/token_input.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "io/printable.h"

namespace train {

namespace {
std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}
}  // namespace

std::vector<int32_t> parse_token_names(const Task& task, const std::string& text,
                                       const std::string& argument) {
  std::vector<int32_t> ids;
  for (const std::string& w : words(text)) {
    const std::optional<int> id = task.token_id(w);
    if (!id) {
      std::string known;
      for (int i = 0; i < task.vocab_size() && i < 12; ++i) known += (i ? " " : "") + task.token_name(i);
      throw std::invalid_argument(argument + ": unknown token '" + io::printable(w) +
                                  "' (the task's tokens: " + known +
                                  (task.vocab_size() > 12 ? " ...)" : ")"));
    }
    ids.push_back(*id);
  }
  if (ids.empty()) throw std::invalid_argument(argument + ": expected at least one token");
  return ids;
}

std::vector<int32_t> parse_token_ids(int vocab, const std::string& text, const std::string& argument) {
  std::vector<int32_t> ids;
  for (const std::string& w : words(text)) {
    // Plain decimal, as --tokens and the printed ids write them: no sign, no leading zero.
    int64_t v = -1;
    const bool plain = !w.empty() && w.size() <= 10 && (w == "0" || w[0] != '0') &&
                       std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (plain) v = std::stoll(w);
    if (v < 0 || v >= vocab)
      throw std::invalid_argument(argument + ": '" + io::printable(w) + "' is not a token id in 0.." +
                                  std::to_string(vocab - 1));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw std::invalid_argument(argument + ": expected at least one token id");
  return ids;
}

}  // namespace train
