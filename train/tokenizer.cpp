#include "train/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <array>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "io/json_read.h"
#include "train/tasks/data_file.h"

namespace train {
namespace {

using json = nlohmann::json;

// GPT-2's pre-tokenizer pattern (Hugging Face's ByteLevel with use_regex, and GPT-2's encoder.py).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Bounds on what a file may declare, far above any published tokenizer (Llama 3: 128,256 tokens).
constexpr size_t kMaxTokens = size_t(1) << 22;
constexpr size_t kMaxTokenBytes = 1024;
// Words up to this long are merged every time rather than looked up in encode's cache.
constexpr size_t kUncachedBytes = 3;

// GPT-2's byte-to-unicode table: the printable bytes stand for themselves, the other 68 for the code points
// 256, 257, ... in byte order, so every token is printable text.
const std::array<uint32_t, 256>& byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

// The code point at text[i] and its length in bytes, or length 0 when the bytes there are not UTF-8.
std::pair<uint32_t, size_t> utf8_at(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {b0, 1};
  size_t n;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {0, 0};
  }
  if (i + n > text.size()) return {0, 0};
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, n};
}

// The bytes a byte-level vocabulary string stands for; nothing when a character is outside the table.
std::optional<std::string> unicode_to_bytes(std::string_view text) {
  static const std::unordered_map<uint32_t, unsigned char> inverse = [] {
    std::unordered_map<uint32_t, unsigned char> m;
    for (int b = 0; b < 256; ++b)
      m[byte_to_unicode()[static_cast<size_t>(b)]] = static_cast<unsigned char>(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto [cp, n] = utf8_at(text, i);
    const auto it = n ? inverse.find(cp) : inverse.end();
    if (it == inverse.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    i += n;
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw TokenizerError(path + ": cannot read (not a regular file)");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw TokenizerError(path + ": cannot read (" + ec.message() + ")");
  if (size > Tokenizer::kMaxFileBytes)
    throw TokenizerError(path + ": " + std::to_string(size) + " bytes, over the limit of " +
                         std::to_string(Tokenizer::kMaxFileBytes) + " for a tokenizer file");
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in || in.gcount() != static_cast<std::streamsize>(text.size()))
    throw TokenizerError(path + ": cannot read (the file changed while it was read)");
  return text;
}

// A compiled PCRE2 pattern, shared read-only by every encode call (each has its own match data).
struct Pattern {
  pcre2_code* code = nullptr;
  Pattern() = default;
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;
  ~Pattern() {
    if (code) pcre2_code_free(code);
  }
};

// The merges as a flat open-addressing table (linear probing, a power-of-two size at most half full):
// the merge loop's one lookup per candidate pair is its hottest line.
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;  // -1: an empty slot
    int32_t id = 0;
  };
  void reserve(size_t n) {
    size_t size = 16;
    shift_ = 60;
    while (size < 2 * n) size *= 2, --shift_;
    keys_.assign(size, 0);
    values_.assign(size, Merge{});
    mask_ = size - 1;
  }
  // Keeps the first merge of a pair (the lowest rank), as a file listing a pair twice means.
  void insert(uint64_t key, Merge m) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (values_[i].rank < 0) {
        keys_[i] = key;
        values_[i] = m;
        return;
      }
      if (keys_[i] == key) return;
    }
  }
  const Merge* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (values_[i].rank < 0) return nullptr;
      if (keys_[i] == key) return &values_[i];
    }
  }

 private:
  // Fibonacci hashing: the product's top bits depend on every bit of both ids.
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t mask_ = 0;
  int shift_ = 60;
};

// How a Split step treats its matches: kept as words (Isolated) or dropped (Removed).
enum class SplitBehavior { kIsolated, kRemoved };

struct Step {
  std::shared_ptr<Pattern> pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  std::vector<std::string> bytes;  // id -> the bytes it stands for
  std::vector<uint8_t> added;      // id -> 1 for an added token
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<std::string, int32_t> by_bytes;  // for ignore_merges
  MergeTable merges;                                  // (left id << 32 | right id) -> rank and result
  std::vector<Step> steps;                            // the pre-tokenizer, applied in order
  bool add_prefix_space = false;
  bool ignore_merges = false;
  // The normalizer (a Unicode normal form, or a Sequence of them), applied in order to the text between
  // added tokens before the pre-tokenizer; empty for none.
  std::vector<const UNormalizer2*> normalizers;
  // The added tokens' texts, longest first, each with its id.
  std::vector<std::pair<std::string, int32_t>> added_texts;
  std::array<uint8_t, 256> added_first{};  // 1 for a byte an added token starts with
  std::optional<int32_t> bos;

  // Splits `text` by steps[k..] and hands each word to `word`. One match data serves every pattern:
  // split reads only the whole match (pair 0) and reads it before recursing.
  void split(std::string_view text, size_t k, pcre2_match_data* md,
             const std::function<void(std::string_view)>& word) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // `text` through the normalizers: each run of valid UTF-8 is normalized, any other byte is kept.
  std::string normalize(std::string_view text) const;
};

namespace {

std::shared_ptr<Pattern> compile(const std::string& pattern, bool literal, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = literal ? PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  auto p = std::make_shared<Pattern>();
  p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                          &offset, nullptr);
  if (!p->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TokenizerError(where + ": the pattern does not compile at offset " + std::to_string(offset) + " (" +
                         reinterpret_cast<const char*>(message) + ")");
  }
  pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is missing
  return p;
}

// JSON access with errors naming the file and pointer.
struct Doc {
  const std::string& path;
  [[noreturn]] void fail(const std::string& pointer, const std::string& what) const {
    throw TokenizerError(path + ": " + (pointer.empty() ? "/" : pointer) + ": " + what);
  }
  const json& field(const json& object, const std::string& pointer, const char* key) const {
    if (!object.is_object()) fail(pointer, "expected an object");
    const auto it = object.find(key);
    if (it == object.end()) fail(pointer + "/" + key, "missing");
    return *it;
  }
  std::string string(const json& value, const std::string& pointer) const {
    if (!value.is_string()) fail(pointer, "expected a string");
    return value.get<std::string>();
  }
  bool boolean(const json& object, const std::string& pointer, const char* key, bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(pointer + "/" + key, "expected true or false");
    return it->get<bool>();
  }
};

constexpr const char* kSentencePiece =
    "a SentencePiece-style tokenizer (Llama 2, TinyLlama: Metaspace, byte_fallback), which attograd does not "
    "read; only byte-level BPE is supported";

}  // namespace

void Tokenizer::Impl::split(std::string_view text, size_t k, pcre2_match_data* md,
                            const std::function<void(std::string_view)>& word) const {
  if (text.empty()) return;
  if (k == steps.size()) {
    word(text);
    return;
  }
  const Step& step = steps[k];
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(step.pattern->code, subject, text.size(), at, PCRE2_NOTEMPTY, md, nullptr);
    if (rc < 0) break;  // no more matches (or a match limit: the rest is one word)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0], end = ov[1];
    if (begin > at) split(text.substr(at, begin - at), k + 1, md, word);
    if (step.behavior == SplitBehavior::kIsolated) split(text.substr(begin, end - begin), k + 1, md, word);
    at = end;
  }
  if (at < text.size()) split(text.substr(at), k + 1, md, word);
}

void Tokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    const auto it = by_bytes.find(std::string(word));
    if (it != by_bytes.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // One symbol per byte in a linked list; a heap of candidate pairs by (rank, position). A popped pair is
  // stale when either side has since merged; merging pushes the two new pairs around the result.
  struct Symbol {
    int32_t id, prev, next;
  };
  struct Candidate {
    int32_t rank, pos, right, left_id, right_id, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  const int32_t n = static_cast<int32_t>(word.size());
  symbols.resize(static_cast<size_t>(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    symbols[static_cast<size_t>(i)] = {byte_id[static_cast<unsigned char>(word[static_cast<size_t>(i)])],
                                       i - 1, i + 1 < n ? i + 1 : -1};
  const auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t a = symbols[static_cast<size_t>(left)].id, b = symbols[static_cast<size_t>(right)].id;
    const MergeTable::Merge* m = merges.find(static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b));
    if (!m) return;
    heap.push_back({m->rank, left, right, a, b, m->id});
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(c.pos)];
    if (left.id != c.left_id || left.next != c.right) continue;
    Symbol& right = symbols[static_cast<size_t>(c.right)];
    if (right.id != c.right_id) continue;
    left.id = c.id;
    left.next = right.next;
    right.id = -1;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = c.pos;
    push(left.prev, c.pos);
    push(c.pos, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// Fills what every tokenizer shares once the vocabulary (id -> byte-level text) and the merges (pairs of
// texts) are known. `vocab_at` and `merge_at` name a token and a merge in errors.
void build(Tokenizer::Impl& t, const Doc& doc, const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges,
           const std::function<std::string(size_t)>& merge_at, const std::string& vocab_at) {
  std::unordered_map<std::string, int32_t> id_of;
  size_t size = 0;
  for (const auto& [text, id] : vocab) {
    if (id < 0 || static_cast<size_t>(id) >= kMaxTokens)
      doc.fail(vocab_at,
               "token id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxTokens - 1));
    size = std::max(size, static_cast<size_t>(id) + 1);
    id_of.emplace(text, id);
  }
  t.bytes.assign(size, std::string());
  t.added.assign(size, 0);
  std::vector<uint8_t> seen(size, 0);
  for (const auto& [text, id] : vocab) {
    if (seen[static_cast<size_t>(id)] && t.bytes[static_cast<size_t>(id)] != text)
      doc.fail(vocab_at, "token id " + std::to_string(id) + " is given twice");
    seen[static_cast<size_t>(id)] = 1;
    // A token outside the byte-level alphabet (a special token's own spelling) stands for its text as is.
    std::optional<std::string> b = unicode_to_bytes(text);
    t.bytes[static_cast<size_t>(id)] = b ? *b : text;
  }
  for (size_t id = 0; id < size; ++id)
    if (!seen[id]) doc.fail(vocab_at, "no token has id " + std::to_string(id));
  for (int b = 0; b < 256; ++b) {
    std::string name;
    tasks::append_utf8(name, byte_to_unicode()[static_cast<size_t>(b)]);
    const auto it = id_of.find(name);
    if (it == id_of.end())
      doc.fail(vocab_at, "no token for the byte " + std::to_string(b) + " ('" + bpe_token_name(name) +
                             "'): a byte-level vocabulary has all 256");
    t.byte_id[static_cast<size_t>(b)] = it->second;
  }
  t.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto a = id_of.find(merges[i].first), b = id_of.find(merges[i].second);
    const auto ab = id_of.find(merges[i].first + merges[i].second);
    if (a == id_of.end() || b == id_of.end() || ab == id_of.end())
      doc.fail(merge_at(i), "merges '" + bpe_token_name(merges[i].first) + "' and '" +
                                bpe_token_name(merges[i].second) +
                                "', which (or whose result) is not in the vocabulary");
    const uint64_t key = static_cast<uint64_t>(a->second) << 32 | static_cast<uint32_t>(b->second);
    t.merges.insert(key, {static_cast<int32_t>(i), ab->second});
  }
  for (size_t id = 0; id < size; ++id) t.by_bytes.emplace(t.bytes[id], static_cast<int32_t>(id));
}

void finish_added(Tokenizer::Impl& t) {
  std::sort(t.added_texts.begin(), t.added_texts.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() > b.first.size() : a.second < b.second;
  });
  for (const auto& [text, id] : t.added_texts) t.added_first[static_cast<unsigned char>(text[0])] = 1;
}

// The Split and ByteLevel parts of a pre_tokenizer (possibly a Sequence), in order.
void read_pre_tokenizer(Tokenizer::Impl& t, const Doc& doc, const json& p, const std::string& at,
                        bool& byte_level) {
  if (p.is_null()) return;
  const std::string type = doc.string(doc.field(p, at, "type"), at + "/type");
  if (type == "Sequence") {
    const json& list = doc.field(p, at, "pretokenizers");
    if (!list.is_array()) doc.fail(at + "/pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(t, doc, list[i], at + "/pretokenizers/" + std::to_string(i), byte_level);
  } else if (type == "ByteLevel") {
    byte_level = true;
    t.add_prefix_space = doc.boolean(p, at, "add_prefix_space", false);
    if (doc.boolean(p, at, "use_regex", true))
      t.steps.push_back({compile(kGpt2Pattern, false, doc.path + ": " + at), {}});
  } else if (type == "Split") {
    const json& pattern = doc.field(p, at, "pattern");
    const bool literal = pattern.is_object() && pattern.contains("String");
    if (!pattern.is_object() || (!literal && !pattern.contains("Regex")))
      doc.fail(at + "/pattern", "expected {\"Regex\": PATTERN} or {\"String\": TEXT}");
    const std::string key = literal ? "String" : "Regex";
    const std::string text = doc.string(pattern[key], at + "/pattern/" + key);
    if (doc.boolean(p, at, "invert", false)) doc.fail(at + "/invert", "only false is supported");
    const std::string behavior = doc.string(doc.field(p, at, "behavior"), at + "/behavior");
    Step step{compile(text, literal, doc.path + ": " + at + "/pattern/" + key), SplitBehavior::kIsolated};
    if (behavior == "Removed") {
      step.behavior = SplitBehavior::kRemoved;
    } else if (behavior != "Isolated") {
      doc.fail(at + "/behavior", "\"" + behavior + "\" is not supported (Isolated or Removed)");
    }
    t.steps.push_back(std::move(step));
  } else if (type == "Digits") {
    const bool each = doc.boolean(p, at, "individual_digits", false);
    t.steps.push_back({compile(each ? R"(\p{N})" : R"(\p{N}+)", false, doc.path + ": " + at), {}});
  } else if (type == "Metaspace") {
    doc.fail(at + "/type", std::string("Metaspace is ") + kSentencePiece);
  } else {
    doc.fail(at + "/type", "the pre-tokenizer \"" + type +
                               "\" is not supported (ByteLevel, Split, Digits, or a Sequence of them)");
  }
}

// The Unicode normal forms of a normalizer (GPT-NeoX's and Pythia's NFC), possibly in a Sequence, in order.
// SentencePiece's normalizers (Prepend, Replace, Precompiled) and the others are refused.
void read_normalizer(Tokenizer::Impl& t, const Doc& doc, const json& n, const std::string& at) {
  if (n.is_null()) return;
  const std::string type = doc.string(doc.field(n, at, "type"), at + "/type");
  if (type == "Sequence") {
    const json& list = doc.field(n, at, "normalizers");
    if (!list.is_array()) doc.fail(at + "/normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_normalizer(t, doc, list[i], at + "/normalizers/" + std::to_string(i));
    return;
  }
  using Get = const UNormalizer2* (*)(UErrorCode*);
  const std::map<std::string, Get> forms = {{"NFC", unorm2_getNFCInstance},
                                            {"NFD", unorm2_getNFDInstance},
                                            {"NFKC", unorm2_getNFKCInstance},
                                            {"NFKD", unorm2_getNFKDInstance}};
  const auto form = forms.find(type);
  if (form == forms.end()) {
    if (type == "Prepend" || type == "Replace" || type == "Precompiled")
      doc.fail(at + "/type", "\"" + type + "\" is the normalizer of " + kSentencePiece);
    doc.fail(at + "/type", "the normalizer \"" + type +
                               "\" is not supported (NFC, NFD, NFKC, NFKD, or a Sequence of them)");
  }
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* normalizer = form->second(&status);
  if (U_FAILURE(status) || !normalizer)
    doc.fail(at + "/type", type + ": ICU's normalizer is unavailable (" + u_errorName(status) + ")");
  t.normalizers.push_back(normalizer);
}

}  // namespace

std::string Tokenizer::Impl::normalize(std::string_view text) const {
  std::string out;
  std::vector<UChar> in16, out16;
  // Normalizes text[begin, end), valid UTF-8 of at most a chunk, through every form in order.
  const auto chunk = [&](size_t begin, size_t end) {
    if (begin == end) return;
    UErrorCode status = U_ZERO_ERROR;
    int32_t n = 0;
    in16.resize(end - begin);  // UTF-16 needs at most one unit per UTF-8 byte
    u_strFromUTF8(in16.data(), static_cast<int32_t>(in16.size()), &n, text.data() + begin,
                  static_cast<int32_t>(end - begin), &status);
    in16.resize(static_cast<size_t>(n));
    for (const UNormalizer2* form : normalizers) {
      // A normal form may grow a string (NFKD of U+FDFA by 18 times): when ICU asks for more room, again.
      out16.resize(in16.size() * 4 + 16);
      do {
        status = U_ZERO_ERROR;
        n = unorm2_normalize(form, in16.data(), static_cast<int32_t>(in16.size()), out16.data(),
                             static_cast<int32_t>(out16.size()), &status);
        if (status == U_BUFFER_OVERFLOW_ERROR) out16.resize(static_cast<size_t>(n));
      } while (status == U_BUFFER_OVERFLOW_ERROR);
      if (U_FAILURE(status))
        throw TokenizerError(source + ": normalizing text failed: " + u_errorName(status));
      out16.resize(static_cast<size_t>(n));
      in16.swap(out16);
    }
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a surrogate pair's 4 for two).
    const size_t at = out.size();
    out.resize(at + 3 * in16.size());
    status = U_ZERO_ERROR;
    u_strToUTF8(&out[at], static_cast<int32_t>(3 * in16.size()), &n, in16.data(),
                static_cast<int32_t>(in16.size()), &status);
    if (U_FAILURE(status)) throw TokenizerError(source + ": normalizing text failed: " + u_errorName(status));
    out.resize(at + static_cast<size_t>(n));
  };
  // A run of valid UTF-8 goes in chunks of about kChunk bytes, each ending before a code point that every
  // form normalizes independently of what precedes it (unorm2_hasBoundaryBefore), so that a long text
  // costs buffers of a chunk, not of the text.
  constexpr size_t kChunk = 16384;
  const auto run = [&](size_t begin, size_t end) {
    while (end - begin > kChunk) {
      size_t cut = begin + kChunk;
      while (cut < end && (text[cut] & 0xC0) == 0x80) ++cut;  // to a code point's first byte
      while (cut < end) {
        const auto [cp, bytes] = utf8_at(text, cut);
        bool boundary = true;
        for (const UNormalizer2* form : normalizers)
          boundary = boundary && unorm2_hasBoundaryBefore(form, static_cast<UChar32>(cp));
        if (boundary) break;
        cut += bytes;
      }
      chunk(begin, cut);
      begin = cut;
    }
    chunk(begin, end);
  };
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_at(text, i).second;
    if (n > 0) {
      i += n;
      continue;
    }
    run(start, i);
    out += text[i];  // not UTF-8: kept as it is
    start = ++i;
  }
  run(start, text.size());
  return out;
}

Tokenizer Tokenizer::from_tokenizer_json(const std::string& path) {
  json root;
  try {
    root = io::parse_json_text(read_file(path), path);
  } catch (const io::JsonError& e) {
    throw TokenizerError(e.what());
  }
  const Doc doc{path};
  auto t = std::make_unique<Impl>();
  t->source = path;
  const json& model = doc.field(root, "", "model");
  const auto type = model.find("type");
  if (type != model.end() && !(type->is_string() && *type == "BPE"))
    doc.fail("/model/type",
             "expected \"BPE\" (byte-level BPE is the tokenizer attograd reads), got " + type->dump());
  if (doc.boolean(model, "/model", "byte_fallback", false))
    doc.fail("/model/byte_fallback", std::string("true is ") + kSentencePiece);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      doc.fail(std::string("/model/") + key, "is not supported by byte-level BPE (expected null)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null())
    doc.fail("/model/dropout", "BPE dropout is for training; expected null");
  t->ignore_merges = doc.boolean(model, "/model", "ignore_merges", false);
  if (root.contains("normalizer")) read_normalizer(*t, doc, root["normalizer"], "/normalizer");

  const json& vocab = doc.field(model, "/model", "vocab");
  if (!vocab.is_object()) doc.fail("/model/vocab", "expected an object of token: id");
  if (vocab.size() > kMaxTokens)
    doc.fail("/model/vocab", "more than " + std::to_string(kMaxTokens) + " tokens");
  std::vector<std::pair<std::string, int32_t>> tokens;
  tokens.reserve(vocab.size());
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(kMaxTokens))
      doc.fail("/model/vocab/" + bpe_token_name(text),
               "expected a token id in 0.." + std::to_string(kMaxTokens - 1));
    tokens.emplace_back(text, static_cast<int32_t>(id.get<int64_t>()));
  }
  // Added tokens may be outside model.vocab (Llama 3's): they join the vocabulary.
  std::vector<std::pair<std::string, int32_t>> added;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) doc.fail("/added_tokens", "expected an array");
    if (list.size() > kMaxTokens) doc.fail("/added_tokens", "too many tokens");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = "/added_tokens/" + std::to_string(i);
      const json& id = doc.field(list[i], at, "id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(kMaxTokens))
        doc.fail(at + "/id", "expected a token id in 0.." + std::to_string(kMaxTokens - 1));
      const std::string content = doc.string(doc.field(list[i], at, "content"), at + "/content");
      if (content.empty() || content.size() > kMaxTokenBytes)
        doc.fail(at + "/content", "expected 1.." + std::to_string(kMaxTokenBytes) + " bytes");
      added.emplace_back(content, static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  std::vector<std::pair<std::string, int32_t>> all = tokens;
  for (const auto& [content, id] : added) {
    const auto it = vocab.find(content);
    if (it == vocab.end() || it->get<int64_t>() != id) all.emplace_back(content, id);
  }

  const json& merges = doc.field(model, "/model", "merges");
  if (!merges.is_array()) doc.fail("/model/merges", "expected an array");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string at = "/model/merges/" + std::to_string(i);
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
          s.find(' ', space + 1) != std::string::npos)
        doc.fail(at, "expected \"A B\" (two tokens and one space)");
      pairs.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      doc.fail(at, "expected \"A B\" or [\"A\", \"B\"]");
    }
  }
  build(
      *t, doc, all, pairs, [](size_t i) { return "/model/merges/" + std::to_string(i); }, "/model/vocab");
  for (const auto& [content, id] : added) {
    t->added[static_cast<size_t>(id)] = 1;
    t->bytes[static_cast<size_t>(id)] = content;
    t->added_texts.emplace_back(content, id);
  }
  finish_added(*t);

  bool byte_level = false;
  if (root.contains("pre_tokenizer"))
    read_pre_tokenizer(*t, doc, root["pre_tokenizer"], "/pre_tokenizer", byte_level);
  if (!byte_level) {
    const json* decoder = root.contains("decoder") ? &root["decoder"] : nullptr;
    const bool decodes_bytes = decoder && decoder->is_object() && decoder->value("type", "") == "ByteLevel";
    if (!decodes_bytes)
      doc.fail("/pre_tokenizer", "no ByteLevel pre-tokenizer or decoder: not a byte-level BPE (" +
                                     std::string(kSentencePiece) + ")");
  }
  // Llama's TemplateProcessing puts a special token before every sequence: that is its BOS.
  if (root.contains("post_processor") && root["post_processor"].is_object()) {
    const json& post = root["post_processor"];
    std::vector<const json*> processors{&post};
    if (post.value("type", "") == "Sequence" && post.contains("processors") && post["processors"].is_array())
      for (const json& p : post["processors"]) processors.push_back(&p);
    for (const json* p : processors) {
      if (!p->is_object() || p->value("type", "") != "TemplateProcessing") continue;
      const json& single = p->contains("single") ? (*p)["single"] : json();
      if (!single.is_array() || single.empty() || !single[0].is_object() ||
          !single[0].contains("SpecialToken"))
        continue;
      const json& name = single[0]["SpecialToken"].contains("id") ? single[0]["SpecialToken"]["id"] : json();
      if (!name.is_string()) continue;
      for (const auto& [content, id] : t->added_texts)
        if (content == name.get<std::string>()) t->bos = id;
      if (!t->bos)
        doc.fail("/post_processor/single/0",
                 "names '" + bpe_token_name(name.get<std::string>()) + "', which is not an added token");
    }
  }
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
  json vocab;
  try {
    vocab = io::parse_json_text(read_file(vocab_json), vocab_json);
  } catch (const io::JsonError& e) {
    throw TokenizerError(e.what());
  }
  const Doc vdoc{vocab_json};
  if (!vocab.is_object()) vdoc.fail("", "expected an object of token: id");
  if (vocab.size() > kMaxTokens) vdoc.fail("", "more than " + std::to_string(kMaxTokens) + " tokens");
  std::vector<std::pair<std::string, int32_t>> tokens;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(kMaxTokens))
      vdoc.fail("/" + bpe_token_name(text), "expected a token id in 0.." + std::to_string(kMaxTokens - 1));
    tokens.emplace_back(text, static_cast<int32_t>(id.get<int64_t>()));
  }
  const std::string text = read_file(merges_txt);
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<size_t> lines;
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw TokenizerError(merges_txt + ": line " + std::to_string(number) +
                           ": expected \"A B\" (two tokens and one space)");
    pairs.emplace_back(line.substr(0, space), line.substr(space + 1));
    lines.push_back(number);
  }
  auto t = std::make_unique<Impl>();
  t->source = vocab_json;
  // Merge errors name merges.txt's line; vocabulary errors name vocab.json.
  try {
    build(
        *t, vdoc, tokens, pairs, [&](size_t i) { return "merges.txt line " + std::to_string(lines[i]); }, "");
  } catch (const TokenizerError& e) {
    const std::string what = e.what();
    const std::string prefix = vocab_json + ": merges.txt line ";
    if (what.rfind(prefix, 0) == 0) throw TokenizerError(merges_txt + ": line " + what.substr(prefix.size()));
    throw;
  }
  t->steps.push_back({compile(kGpt2Pattern, false, vocab_json), {}});
  const auto eot = vocab.find("<|endoftext|>");
  if (eot != vocab.end()) {
    const int32_t id = static_cast<int32_t>(eot->get<int64_t>());
    t->added[static_cast<size_t>(id)] = 1;
    t->added_texts.emplace_back("<|endoftext|>", id);
  }
  finish_added(*t);
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return from_tokenizer_json(path);
  const std::filesystem::path dir(path);
  if (std::filesystem::exists(dir / "tokenizer.json", ec))
    return from_tokenizer_json((dir / "tokenizer.json").string());
  if (std::filesystem::exists(dir / "vocab.json", ec) && std::filesystem::exists(dir / "merges.txt", ec))
    return from_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string());
  throw TokenizerError(path + ": holds no tokenizer.json, nor vocab.json and merges.txt");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  // Each distinct word is merged once per call.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached;
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      t.steps.empty() ? nullptr : pcre2_match_data_create_from_pattern(t.steps[0].pattern->code, nullptr),
      pcre2_match_data_free);
  const std::function<void(std::string_view)> word = [&](std::string_view w) {
    // A short word merges about as fast as the cache finds it.
    if (w.size() <= kUncachedBytes) {
      t.encode_word(w, out);
      return;
    }
    const auto it = cache.find(w);
    if (it != cache.end()) {
      out.insert(out.end(), cached.begin() + it->second.first,
                 cached.begin() + it->second.first + it->second.second);
      return;
    }
    const size_t before = out.size();
    t.encode_word(w, out);
    cache.emplace(
        w, std::make_pair(static_cast<uint32_t>(cached.size()), static_cast<uint32_t>(out.size() - before)));
    cached.insert(cached.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
  };
  std::string prefixed;
  std::deque<std::string> normalized;  // the cache's words point into them
  const auto piece = [&](std::string_view p) {
    if (p.empty()) return;
    if (!t.normalizers.empty() && std::any_of(p.begin(), p.end(), [](char c) { return c & 0x80; })) {
      normalized.push_back(t.normalize(p));  // ASCII is its own normal form in all four
      p = normalized.back();
    }
    t.split(p, 0, md.get(), word);
  };
  if (t.add_prefix_space && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    bool matched = false;
    if (t.added_first[static_cast<unsigned char>(text[i])]) {
      for (const auto& [content, id] : t.added_texts) {
        if (text.compare(i, content.size(), content) == 0) {
          piece(text.substr(start, i - start));
          out.push_back(id);
          i += content.size();
          start = i;
          matched = true;
          break;
        }
      }
    }
    if (!matched) ++i;
  }
  piece(text.substr(start));
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the tokenizer's vocabulary 0.." +
                            std::to_string(vocab_size() - 1));
  return impl_->bytes[static_cast<size_t>(id)];
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->added[static_cast<size_t>(id)];
}

int Tokenizer::vocab_size() const {
  return static_cast<int>(impl_->bytes.size());
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
const std::string& Tokenizer::source() const {
  return impl_->source;
}

std::string bpe_token_name(std::string_view bytes) {
  std::string out;
  char escaped[8];
  for (size_t i = 0; i < bytes.size();) {
    const auto [cp, n] = utf8_at(bytes, i);
    if (n == 0) {
      std::snprintf(escaped, sizeof escaped, "\\x%02X",
                    static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
      out += escaped;
      ++i;
      continue;
    }
    out += tasks::text_token_name(cp, false);
    i += n;
  }
  return out;
}

}  // namespace train
