// text: a UTF-8 text file (task.path) as a character- or byte-level language model, as nanoGPT's
// shakespeare_char: every distinct character (task.unit "char") or byte ("byte") a token, the tokens sorted
// by code point; or (unit "bpe") the file encoded by a byte-level BPE tokenizer (task.tokenizer), whose
// whole vocabulary is the task's, in the tokenizer's ids; training windows of T + 1 tokens (T = task.length)
// drawn uniformly from the first 90% of the file (or task.train_fraction of it), held-out windows from the
// rest; every position scored.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks.h"
#include "train/tasks/data_file.h"

namespace train {
namespace tasks {
namespace {

constexpr int64_t kMaxFileBytes = 64 << 20;
constexpr double kDefaultTrainFraction = 0.9;

// The code points of UTF-8 text; throws TaskDataError naming the line and byte of the first malformed one.
std::vector<uint32_t> decode_utf8(const std::string& text, const std::string& path) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    int extra = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      extra = -1;
    }
    bool ok = extra >= 0;
    for (int k = 1; ok && k <= extra; ++k) {
      ok = i + k < text.size() && (byte(i + k) & 0xC0) == 0x80;
      if (ok) cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      throw TaskDataError("path", path + ":" + std::to_string(line) + ": byte " + std::to_string(i) +
                                      " is not valid UTF-8 (use task.unit \"byte\" for binary text)");
    }
    if (cp == '\n') ++line;
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

class TextTask : public Task {
 public:
  TextTask(const TaskConfig& config, std::vector<uint32_t> vocab, std::vector<int32_t> ids,
           std::shared_ptr<const Tokenizer> bpe = nullptr)
      : Task(config, bpe ? tokenizer_token_names(*bpe) : names_of(vocab, config.unit == "byte"),
             config.length),
        code_points_(std::move(vocab)),
        ids_(std::move(ids)),
        bpe_(std::move(bpe)) {
    const double fraction = config.train_fraction > 0 ? config.train_fraction : kDefaultTrainFraction;
    cut_ = static_cast<int64_t>(fraction * static_cast<double>(ids_.size()));
    const int64_t window = seq_len() + 1;
    const int64_t train = cut_, held = static_cast<int64_t>(ids_.size()) - cut_;
    if (train < window || held < window) {
      throw TaskDataError(
          config.train_fraction > 0 ? "train_fraction" : "path",
          config.path + ": its " + std::to_string(ids_.size()) + " tokens split into " +
              std::to_string(train) + " for training and " + std::to_string(held) +
              " held out; each side needs a window of task.length + 1 = " + std::to_string(window));
    }
  }

  std::optional<std::vector<int32_t>> encode_text(const std::string& text) const override {
    if (bpe_) return bpe_->encode(text);
    std::vector<uint32_t> units;
    if (config().unit == "byte") {
      for (unsigned char c : text) units.push_back(c);
    } else {
      try {
        units = decode_utf8(text, "text");
      } catch (const TaskDataError&) {
        throw std::invalid_argument("the text is not valid UTF-8");
      }
    }
    std::vector<int32_t> ids;
    for (uint32_t u : units) {
      const auto it = std::lower_bound(code_points_.begin(), code_points_.end(), u);
      if (it == code_points_.end() || *it != u)
        throw std::invalid_argument("'" + text_token_name(u, config().unit == "byte") +
                                    "' does not occur in " + config().path +
                                    ", so the model has no token for it");
      ids.push_back(static_cast<int32_t>(it - code_points_.begin()));
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    if (bpe_) return bpe_->decode(ids);
    std::string out;
    for (int32_t id : ids) {
      const uint32_t c = code_points_.at(static_cast<size_t>(id));
      if (config().unit == "byte") {
        out += static_cast<char>(c);
      } else {
        append_utf8(out, c);
      }
    }
    return out;
  }

  std::vector<int> scored_positions_of(const std::vector<int32_t>& sequence) const override {
    return range(0, static_cast<int>(sequence.size()) - 2);
  }

  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    return std::vector<std::vector<int>>(inputs.size());
  }

  bool splits_itself() const override { return true; }

  std::optional<int> bos_id() const override { return bpe_ ? bpe_->bos_id() : std::nullopt; }
  const Tokenizer* tokenizer() const override { return bpe_.get(); }

  std::string describe() const override {
    if (bpe_)
      return "text: " + config().path + ", " + std::to_string(ids_.size()) + " tokens of " + bpe_->source() +
             " (" + std::to_string(vocab_size()) +
             " in its vocabulary); windows of T + 1 = " + std::to_string(seq_len() + 1) + " from the first " +
             std::to_string(cut_) + " for training, from the rest held out; every position scored.";
    return "text: " + config().path + ", " + std::to_string(ids_.size()) + " " + config().unit +
           (config().unit == "byte" ? "s" : "acters") + " of " + std::to_string(vocab_size()) +
           " distinct ones; windows of T + 1 = " + std::to_string(seq_len() + 1) + " from the first " +
           std::to_string(cut_) + " for training, from the rest held out; every position scored.";
  }

 protected:
  std::vector<int32_t> draw_sequence(ag::Rng& rng) const override { return draw_from_split(rng, false); }

  std::vector<int32_t> draw_from_split(ag::Rng& rng, bool held_out) const override {
    const int64_t window = seq_len() + 1;
    const int64_t begin = held_out ? cut_ : 0;
    const int64_t end = held_out ? static_cast<int64_t>(ids_.size()) : cut_;
    const int64_t start =
        begin + static_cast<int64_t>(rng.below(static_cast<uint64_t>(end - begin - window + 1)));
    return std::vector<int32_t>(ids_.begin() + start, ids_.begin() + start + window);
  }

 private:
  static std::vector<std::string> names_of(const std::vector<uint32_t>& vocab, bool is_byte) {
    std::vector<std::string> names;
    for (uint32_t c : vocab) names.push_back(text_token_name(c, is_byte));
    return names;
  }

  std::vector<uint32_t> code_points_;     // token id -> character (or byte), increasing
  std::vector<int32_t> ids_;              // the whole file as token ids
  std::shared_ptr<const Tokenizer> bpe_;  // unit "bpe": the tokenizer (then code_points_ is empty)
  int64_t cut_ = 0;                       // the first held-out token
};

}  // namespace

std::unique_ptr<Task> make_text_task(const TaskConfig& config, const std::string& text) {
  if (config.unit == "bpe") {
    std::shared_ptr<const Tokenizer> bpe = load_task_tokenizer(config.tokenizer, "tokenizer");
    std::vector<int32_t> ids = bpe->encode(text);
    return std::make_unique<TextTask>(config, std::vector<uint32_t>{}, std::move(ids), std::move(bpe));
  }
  std::vector<uint32_t> units;
  if (config.unit == "byte") {
    for (unsigned char c : text) units.push_back(c);
  } else {
    units = decode_utf8(text, config.path);
  }
  std::vector<uint32_t> vocab = units;
  std::sort(vocab.begin(), vocab.end());
  vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
  if (vocab.size() < 2)
    throw TaskDataError("path", config.path + ": expected at least 2 distinct characters");
  std::vector<int32_t> ids;
  ids.reserve(units.size());
  for (uint32_t u : units)
    ids.push_back(static_cast<int32_t>(std::lower_bound(vocab.begin(), vocab.end(), u) - vocab.begin()));
  return std::make_unique<TextTask>(config, std::move(vocab), std::move(ids));
}

namespace {

std::unique_ptr<Task> make_text(const TaskConfig& config) {
  return make_text_task(config, read_data_file(config.path, kMaxFileBytes, "path"));
}

std::optional<TaskProblem> check_text(const TaskConfig& config) {
  if (config.length < 1 || config.length > 10000)
    return TaskProblem{"length", "text's window T must be in 1..10000, got " + std::to_string(config.length)};
  if (config.unit != "char" && config.unit != "byte" && config.unit != "bpe")
    return TaskProblem{"unit", "expected \"char\", \"byte\" or \"bpe\", got \"" + config.unit + "\""};
  if (config.unit == "bpe" && config.tokenizer.empty())
    return TaskProblem{"tokenizer", "unit \"bpe\" reads its tokens from a tokenizer: set task.tokenizer"};
  if (config.unit != "bpe" && !config.tokenizer.empty())
    return TaskProblem{"tokenizer", "only unit \"bpe\" reads a tokenizer"};
  return std::nullopt;
}

}  // namespace

TaskKind text_task() {
  TaskKind kind;
  kind.name = "text";
  kind.format =
      "windows of task.length + 1 characters (bytes, BPE tokens) of task.path; T = length; scored: every "
      "position";
  kind.reads_file = true;
  kind.check = check_text;
  kind.log10_distinct_sequences = [](const TaskConfig&) { return 0.0; };  // windows of a file: not asked
  kind.make = make_text;
  return kind;
}

}  // namespace tasks
}  // namespace train
