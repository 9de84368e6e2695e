// tokenizer_bench: how fast the byte-level BPE tokenizer (train/tokenizer.h) encodes a text, not a test.
// Encodes the whole file REPS times and prints the median time, MB/s (10^6 bytes of text a second), the
// tokens and the bytes per token, and checks that the ids decode back to the text.
// Usage: tokenizer_bench [TOKENIZER [TEXT [REPS]]]
//   defaults: tests/fixtures/tokenizer/tokenizer.json, /usr/share/games/fortunes/cookie, 11
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/timing.h"
#include "train/tokenizer.h"

int main(int argc, char** argv) {
  const std::string tokenizer = argc > 1 ? argv[1] : "tests/fixtures/tokenizer/tokenizer.json";
  const std::string path = argc > 2 ? argv[2] : "/usr/share/games/fortunes/cookie";
  const int reps = argc > 3 ? std::atoi(argv[3]) : 11;
  try {
    const train::Tokenizer t = train::Tokenizer::load(tokenizer);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot read");
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    std::vector<double> seconds;
    std::vector<int32_t> ids;
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      ids = t.encode(text);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (t.decode(ids) != text) throw std::runtime_error("decode(encode(text)) differs from the text");
    const ag::TimingStats stats = ag::timing_stats(seconds);
    std::printf(
        "{\"tokenizer\": \"%s\", \"text\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"bytes_per_token\": "
        "%.3f, "
        "\"median_s\": %.5f, \"spread\": %.3f, \"mb_per_s\": %.2f}\n",
        tokenizer.c_str(), path.c_str(), text.size(), ids.size(),
        static_cast<double>(text.size()) / static_cast<double>(ids.size()), stats.median, stats.spread,
        static_cast<double>(text.size()) / stats.median / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
