// A byte-level BPE tokenizer (GPT-2's, and GPT-Neo's, Pythia's and Llama 3's, which are the same
// algorithm): read from Hugging Face's tokenizer.json or from GPT-2's vocab.json + merges.txt pair.
//
// Encoding: the added (special) tokens are cut out of the text first, longest first where two start at the
// same byte; each piece between them is split into words by the pre-tokenizer (GPT-2's regular expression,
// or the Split patterns tokenizer.json gives, run by PCRE2 with Unicode classes); each word starts as one
// token per byte and its pairs merge by rank (lowest first, leftmost among equal ranks, as Hugging Face's
// tokenizers does). Every byte sequence encodes, whether or not it is UTF-8: bytes the pattern cannot
// match are words of their own. decode(encode(text)) == text for every text, unless the file has a
// normalizer (Unicode normal forms: GPT-NeoX's NFC), when it is the normalized text.
//
// Tokens are held as the bytes they stand for (the vocabulary's byte-to-unicode spelling, "Ġthe" for
// " the", is undone on load). SentencePiece-style files (Metaspace, byte_fallback, Prepend and Replace
// normalizers) are refused with one line naming the field. Every error is a std::runtime_error
// (TokenizerError), one line naming the file and the JSON pointer or line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace train {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  // The largest tokenizer.json, vocab.json or merges.txt read (Llama 3's tokenizer.json is 9 MB).
  static constexpr size_t kMaxFileBytes = size_t(64) << 20;

  // Hugging Face's tokenizer.json (model.type "BPE").
  static Tokenizer from_tokenizer_json(const std::string& path);
  // GPT-2's pair of files, with GPT-2's pre-tokenizer pattern; "<|endoftext|>", when in the vocabulary, is
  // its special token.
  static Tokenizer from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt);
  // tokenizer.json when `path` names a file, the pair when it names a folder holding vocab.json and
  // merges.txt (and no tokenizer.json).
  static Tokenizer load(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of `text` (any bytes).
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of `ids` concatenated; throws std::out_of_range for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes token `id` stands for (not necessarily UTF-8: a token may hold part of a character).
  const std::string& token_bytes(int32_t id) const;
  // Whether token `id` is an added token (special or not), which encode only makes from its exact text.
  bool is_added(int32_t id) const;
  int vocab_size() const;
  // The token the file's post-processor puts in front of every sequence (Llama's "<s>"), if any.
  std::optional<int32_t> bos_id() const;
  // The file it was read from (the vocab.json of a pair).
  const std::string& source() const;

  // The tables and patterns, defined in tokenizer.cpp only (PCRE2 stays out of this header).
  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The name a token gets in a task's token table: its bytes as text, with white space, control characters,
// the backslash and bytes that are not UTF-8 written as escapes (\s, \n, \t, \r, \\, \xNN, \u{NNNN}; the
// text task's names), so a name never holds white space and is unique.
std::string bpe_token_name(std::string_view bytes);

}  // namespace train
