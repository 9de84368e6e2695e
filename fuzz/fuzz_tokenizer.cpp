// The byte-level BPE tokenizer (train/tokenizer.h) on arbitrary bytes: the first byte chooses the file
// layout (tokenizer.json with GPT-2's ByteLevel pattern, or tokenizer_split.json's Split pattern and added
// BOS), the rest is the text. Every byte sequence, UTF-8 or not, must encode to ids inside the vocabulary
// that decode back to exactly the same bytes.
#include <cstdlib>

#include "fuzz/fuzz_common.h"
#include "train/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const train::Tokenizer tokenizers[] = {
      train::Tokenizer::load(ATTOGRAD_SOURCE_DIR "/tests/fixtures/tokenizer/tokenizer.json"),
      train::Tokenizer::load(ATTOGRAD_SOURCE_DIR "/tests/fixtures/tokenizer/tokenizer_split.json"),
  };
  if (size < 1) return 0;
  const train::Tokenizer& t = tokenizers[data[0] % 2];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = t.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  if (t.decode(ids) != text) {
    std::fprintf(stderr, "decode(encode(text)) != text for %s\n", io::printable(text).c_str());
    std::abort();
  }
  return 0;
}
