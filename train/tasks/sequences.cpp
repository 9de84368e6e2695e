// sequences: the user's own sequences, one JSON object a line of a JSONL file (task.path):
//   {"tokens": ["BOS", "a", "b", "=", "c"], "scored": [4]}   the indices of the tokens to predict
//   {"tokens": [...]}                                        every token after the first is predicted
//   {"prompt": ["BOS", "a", "b", "="], "completion": ["c"]}  the completion is predicted
// and optionally "split": "train" | "heldout" on every line (otherwise task.train_fraction splits the lines
// by the seed). Tokens are strings; the vocabulary is the sorted set of the file's tokens, or
// task.vocab_file (one token a line, in that order). Lines may differ in length: T is the longest minus one.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/json_read.h"
#include "io/printable.h"
#include "train/tasks.h"
#include "train/tasks/data_file.h"

namespace train {
namespace tasks {
namespace {

using nlohmann::json;

// Bounds checked before and while reading, so no file makes the loader use unbounded memory or time.
constexpr int64_t kMaxFileBytes = 64 << 20;
constexpr int64_t kMaxVocabFileBytes = 16 << 20;
constexpr size_t kMaxTokensPerLine = 10000;
constexpr size_t kMaxTokenBytes = 256;
constexpr size_t kMaxVocab = 1000000;

// One line as read: its tokens (names), the indices scored, its side if it names one.
struct Line {
  int64_t number = 0;
  std::vector<std::string> tokens;
  std::vector<int> scored;  // token indices 1..n-1, increasing
  int split = -1;           // -1 none, 0 train, 1 held out
};

// A JSON value as an error quotes it: at most 60 bytes of a scalar's text; an array or object by its kind
// (never a dump of a nested value).
std::string shown(const json& value) {
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  const std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

// A token name must be typable after --tokens: non-empty printable UTF-8 without white space.
bool valid_token(const std::string& token) {
  if (token.empty() || token.size() > kMaxTokenBytes || !io::is_printable_utf8(token)) return false;
  return std::none_of(token.begin(), token.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; });
}

class SequenceFile {
 public:
  explicit SequenceFile(const std::string& path) : path_(path) {}

  // The pointer and the message quote the file's own keys and values: io::printable keeps the error one
  // line whatever they hold.
  [[noreturn]] void fail(int64_t line, const std::string& pointer, const std::string& message) const {
    throw TaskDataError("path", path_ + ":" + std::to_string(line) + ": " +
                                    io::printable(pointer + (pointer.empty() ? "" : ": ") + message));
  }

  std::vector<std::string> tokens(const json& value, int64_t line, const std::string& key) const {
    if (!value.is_array()) fail(line, "/" + key, "expected an array of token strings");
    if (value.empty()) fail(line, "/" + key, "expected at least one token, got an empty array");
    if (value.size() > kMaxTokensPerLine)
      fail(line, "/" + key, "more than " + std::to_string(kMaxTokensPerLine) + " tokens");
    std::vector<std::string> out;
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string pointer = "/" + key + "/" + std::to_string(i);
      if (!value[i].is_string()) fail(line, pointer, "expected a token string, got " + shown(value[i]));
      const std::string token = value[i].get<std::string>();
      if (!valid_token(token))
        fail(line, pointer,
             "expected 1 to " + std::to_string(kMaxTokenBytes) +
                 " bytes without white space or control characters, got " + shown(value[i]));
      out.push_back(token);
    }
    return out;
  }

  Line parse(const std::string& text, int64_t number) const {
    // The one bounded reader (io/json_read.h): nesting deeper than 64 levels and duplicate keys are
    // refused as "PATH:N: line 1, column C: ..." before any value is built.
    std::optional<json> parsed;
    try {
      parsed = io::parse_json_text_if_json(text, path_ + ":" + std::to_string(number));
    } catch (const io::JsonError& e) {
      throw TaskDataError("path", e.what());
    }
    if (!parsed) fail(number, "", "not a JSON value (one JSON object a line)");
    const json& doc = *parsed;
    if (!doc.is_object()) fail(number, "", "expected a JSON object, got " + std::string(doc.type_name()));
    Line line;
    line.number = number;
    for (const auto& [key, value] : doc.items()) {
      static const std::set<std::string> known{"tokens", "scored", "prompt", "completion", "split"};
      if (!known.count(key))
        fail(number, "/" + key,
             "unknown key; expected tokens (with scored), or prompt and completion; split");
    }
    const bool has_tokens = doc.contains("tokens");
    const bool has_prompt = doc.contains("prompt") || doc.contains("completion");
    if (has_tokens == has_prompt)
      fail(number, "", "expected either \"tokens\" or \"prompt\" and \"completion\"");
    if (has_tokens) {
      line.tokens = tokens(doc["tokens"], number, "tokens");
      const int n = static_cast<int>(line.tokens.size());
      if (n < 2) fail(number, "/tokens", "expected at least 2 tokens (a first one and one to predict)");
      if (doc.contains("scored")) {
        const json& scored = doc["scored"];
        if (!scored.is_array() || scored.empty())
          fail(number, "/scored", "expected a non-empty array of token indices");
        std::set<int> seen;
        for (size_t i = 0; i < scored.size(); ++i) {
          const std::string pointer = "/scored/" + std::to_string(i);
          if (!scored[i].is_number_integer())
            fail(number, pointer, "expected a token index, got " + shown(scored[i]));
          const int64_t index = scored[i].get<int64_t>();
          if (index < 1 || index >= n)
            fail(number, pointer,
                 std::to_string(index) + " is outside 1.." + std::to_string(n - 1) +
                     " (the indices of the tokens to predict; token 0 has nothing before it)");
          if (!seen.insert(static_cast<int>(index)).second)
            fail(number, pointer, std::to_string(index) + " is scored twice");
        }
        line.scored.assign(seen.begin(), seen.end());
      } else {
        for (int i = 1; i < n; ++i) line.scored.push_back(i);
      }
    } else {
      if (doc.contains("scored")) fail(number, "/scored", "a prompt line scores its completion; drop scored");
      if (!doc.contains("prompt")) fail(number, "/prompt", "missing: a completion needs its prompt");
      if (!doc.contains("completion")) fail(number, "/completion", "missing: a prompt needs its completion");
      line.tokens = tokens(doc["prompt"], number, "prompt");
      const int prompt = static_cast<int>(line.tokens.size());
      const std::vector<std::string> completion = tokens(doc["completion"], number, "completion");
      if (line.tokens.size() + completion.size() > kMaxTokensPerLine)
        fail(number, "/completion", "more than " + std::to_string(kMaxTokensPerLine) + " tokens in all");
      line.tokens.insert(line.tokens.end(), completion.begin(), completion.end());
      for (int i = prompt; i < static_cast<int>(line.tokens.size()); ++i) line.scored.push_back(i);
    }
    if (doc.contains("split")) {
      const json& split = doc["split"];
      if (split == "train") {
        line.split = 0;
      } else if (split == "heldout") {
        line.split = 1;
      } else {
        fail(number, "/split", "expected \"train\" or \"heldout\", got " + shown(split));
      }
    }
    return line;
  }

  std::vector<Line> read(const std::string& text) const {
    std::vector<Line> lines;
    int64_t number = 0;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      ++number;
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      if (std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); })) continue;
      lines.push_back(parse(line, number));
    }
    if (lines.empty()) throw TaskDataError("path", path_ + ": no sequences (one JSON object a line)");
    const bool first_has_split = lines.front().split >= 0;
    for (const Line& line : lines) {
      if ((line.split >= 0) != first_has_split)
        fail(line.number, "/split",
             first_has_split ? "missing: line " + std::to_string(lines.front().number) +
                                   " names a split, so every line must"
                             : "line " + std::to_string(lines.front().number) +
                                   " names no split, so no line may (task.train_fraction splits them)");
    }
    return lines;
  }

 private:
  std::string path_;
};

// The vocabulary file: one token a line, each once.
std::vector<std::string> read_vocab_file(const std::string& path) {
  const std::string text = read_data_file(path, kMaxVocabFileBytes, "vocab_file");
  std::vector<std::string> names;
  std::map<std::string, int64_t> first_line;
  int64_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++number;
    std::string token = text.substr(start, end - start);
    start = end + 1;
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (token.empty()) continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (!valid_token(token))
      throw TaskDataError("vocab_file", where + "expected a token of 1 to " + std::to_string(kMaxTokenBytes) +
                                            " bytes without white space or control characters");
    if (!first_line.emplace(token, number).second)
      throw TaskDataError("vocab_file", where + "token \"" + token + "\" is listed twice (first at line " +
                                            std::to_string(first_line[token]) + ")");
    names.push_back(token);
    if (names.size() > kMaxVocab)
      throw TaskDataError("vocab_file", where + "more than " + std::to_string(kMaxVocab) + " tokens");
  }
  if (names.size() < 2) throw TaskDataError("vocab_file", path + ": expected at least 2 tokens, one a line");
  return names;
}

struct Loaded {
  std::vector<std::string> names;
  std::vector<Line> lines;
  int seq_len = 0;
  int64_t longest_line = 0;
};

Loaded load(const TaskConfig& config, const std::string& text) {
  Loaded loaded;
  loaded.lines = SequenceFile(config.path).read(text);
  if (config.vocab_file.empty()) {
    std::set<std::string> names;
    for (const Line& line : loaded.lines) names.insert(line.tokens.begin(), line.tokens.end());
    if (names.size() > kMaxVocab)
      throw TaskDataError("path",
                          config.path + ": more than " + std::to_string(kMaxVocab) + " distinct tokens");
    loaded.names.assign(names.begin(), names.end());
  } else {
    loaded.names = read_vocab_file(config.vocab_file);
  }
  size_t longest = 0;
  for (const Line& line : loaded.lines) {
    if (line.tokens.size() > longest) {
      longest = line.tokens.size();
      loaded.longest_line = line.number;
    }
  }
  loaded.seq_len = static_cast<int>(longest) - 1;
  return loaded;
}

class SequencesTask : public Task {
 public:
  SequencesTask(const TaskConfig& config, Loaded loaded)
      : Task(config, loaded.names, loaded.seq_len),
        n_lines_(static_cast<int64_t>(loaded.lines.size())),
        longest_line_(loaded.longest_line) {
    std::map<std::string, int32_t> id_of;
    for (size_t i = 0; i < loaded.names.size(); ++i) id_of.emplace(loaded.names[i], static_cast<int32_t>(i));
    Dataset dataset;
    const bool fixed_split = loaded.lines.front().split >= 0;
    if (fixed_split && config.train_fraction != 0)
      throw TaskDataError("train_fraction",
                          config.path + " names each line's split; drop task.train_fraction");
    if (!fixed_split && config.train_fraction == 0)
      throw TaskDataError("train_fraction", "expected a fraction in (0, 1) of " + config.path +
                                                "'s lines to train on, or a \"split\" on every line of it");
    for (const Line& line : loaded.lines) {
      std::vector<int32_t> ids;
      for (size_t i = 0; i < line.tokens.size(); ++i) {
        const auto it = id_of.find(line.tokens[i]);
        if (it == id_of.end())
          throw TaskDataError("path", config.path + ":" + std::to_string(line.number) + ": /tokens/" +
                                          std::to_string(i) + ": \"" + line.tokens[i] + "\" is not in " +
                                          config.vocab_file);
        ids.push_back(it->second);
      }
      std::vector<int> scored;  // input positions: token index - 1
      for (int index : line.scored) scored.push_back(index - 1);
      dataset.sequences.push_back(std::move(ids));
      dataset.scored.push_back(std::move(scored));
      dataset.ids.push_back(line.number);
      if (fixed_split) dataset.held_out.push_back(line.split == 1);
    }
    set_dataset(std::move(dataset), config.path);
  }

  std::string split_id_meaning() const override { return "line"; }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    return std::vector<std::vector<int>>(inputs.size());  // no ideal pattern: the task score is undefined
  }

  std::string describe() const override {
    return "sequences: " + std::to_string(n_lines_) + " sequences from " + config().path + " (" +
           std::to_string(split_size(false)) + " trained on, " + std::to_string(split_size(true)) +
           " held out), " + std::to_string(vocab_size()) + " tokens, T = " + std::to_string(seq_len()) +
           "; scored: the tokens each line names. No ideal attention pattern: the task score is undefined.";
  }

  std::string longest_sequence_note() const override {
    return "line " + std::to_string(longest_line_) + " of " + config().path + " has " +
           std::to_string(seq_len() + 1) + " tokens";
  }

 protected:
  std::vector<int32_t> draw_sequence(ag::Rng&) const override {
    throw std::logic_error("sequences is a finite dataset; it draws no sequences");
  }

 private:
  int64_t n_lines_;
  int64_t longest_line_;
};

}  // namespace

std::unique_ptr<Task> make_sequences_task(const TaskConfig& config, const std::string& text) {
  return std::make_unique<SequencesTask>(config, load(config, text));
}

TaskKind sequences_task() {
  TaskKind kind;
  kind.name = "sequences";
  kind.format =
      "the lines of task.path (JSONL: tokens and scored, or prompt and completion); T = longest - 1";
  kind.reads_file = true;
  kind.log10_distinct_sequences = [](const TaskConfig&) { return 0.0; };  // a finite dataset: not asked
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return make_sequences_task(config, read_data_file(config.path, kMaxFileBytes, "path"));
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
