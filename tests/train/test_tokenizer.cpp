// Tests for train/tokenizer: the encodings of tests/fixtures/tokenizer/encodings.json (a byte-level BPE
// trained and applied by tests/fixtures/make_tokenizer_fixture.py in plain Python) from each of the three
// file layouts, round trips of arbitrary bytes, and one-line errors for broken and unsupported files.
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/temp_dir.h"
#include "train/tokenizer.h"

using train::Tokenizer;

namespace {

const std::string kDir = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/tokenizer/";

nlohmann::json encodings() {
  std::ifstream in(kDir + "encodings.json");
  return nlohmann::json::parse(in);
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The error `make` throws; fails the test when it throws none or more than one line.
template <typename F>
std::string error_of(F make) {
  try {
    make();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find('\n') == std::string::npos);
    return what;
  }
  BOOST_FAIL("no error");
  return "";
}

void check_reference(const Tokenizer& t) {
  const nlohmann::json ref = encodings();
  BOOST_TEST(t.vocab_size() >= ref["vocab"].get<int>());
  for (const auto& item : ref["texts"]) {
    const std::string text = item["text"];
    const std::vector<int32_t> want = item["ids"];
    BOOST_TEST_CONTEXT(item["name"].get<std::string>()) {
      const std::vector<int32_t> got = t.encode(text);
      BOOST_TEST(got == want, boost::test_tools::per_element());
      BOOST_TEST(t.decode(got) == text);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokenizer_json_matches_the_reference) {
  const Tokenizer t = Tokenizer::from_tokenizer_json(kDir + "tokenizer.json");
  check_reference(t);
  BOOST_TEST(!t.bos_id().has_value());
  // The byte-level spelling is undone: "Ġ" is the space byte.
  BOOST_TEST(t.decode(t.encode(" ")) == " ");
}

BOOST_AUTO_TEST_CASE(split_layout_and_pair_merges_match_the_reference) {
  const Tokenizer t = Tokenizer::from_tokenizer_json(kDir + "tokenizer_split.json");
  check_reference(t);
  // Llama 3's layout: BOS only in added_tokens, named by the post-processor's template.
  const int bos = encodings()["bos"];
  BOOST_TEST(t.vocab_size() == bos + 1);
  BOOST_TEST(t.bos_id().value_or(-1) == bos);
  BOOST_TEST(t.is_added(bos));
  BOOST_TEST(t.token_bytes(bos) == "<|begin_of_text|>");
  std::vector<int32_t> want{bos};
  for (int32_t id : t.encode("hi")) want.push_back(id);
  BOOST_TEST(t.encode("<|begin_of_text|>hi") == want);
}

BOOST_AUTO_TEST_CASE(vocab_and_merges_pair_matches_the_reference) {
  check_reference(Tokenizer::from_vocab_merges(kDir + "vocab.json", kDir + "merges.txt"));
  // load() of a folder with only the pair reads the pair.
  testing::TempDir dir;
  for (const char* name : {"vocab.json", "merges.txt"}) {
    std::ifstream in(kDir + name, std::ios::binary);
    std::ofstream out(dir.file(name), std::ios::binary);
    out << in.rdbuf();
  }
  check_reference(Tokenizer::load(dir.dir.string()));
}

BOOST_AUTO_TEST_CASE(every_byte_sequence_round_trips) {
  const Tokenizer t = Tokenizer::load(kDir + "tokenizer.json");
  std::mt19937 rng(7);
  const std::string pieces[] = {" ",    "  ", "\n", "\xF0\x9F\x98", "\x80",          "\xFF",    "e\xCC\x81",
                                "'s",   "ab", "12", "\xE6\x97\xA5", "<|endoftext|>", "<|endof", "\t",
                                "\xC3", "!"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (rng() % 3 == 0) {
        text += static_cast<char>(rng() % 256);
      } else {
        text += pieces[rng() % (sizeof pieces / sizeof pieces[0])];
      }
    }
    const std::vector<int32_t> ids = t.encode(text);
    BOOST_TEST_CONTEXT(trial) {
      BOOST_TEST(t.decode(ids) == text);
    }
  }
  // A long word (one run of letters) merges in time and round-trips.
  const std::string long_word(200000, 'e');
  BOOST_TEST(t.decode(t.encode(long_word)) == long_word);
}

BOOST_AUTO_TEST_CASE(token_names_escape_what_is_not_printable) {
  BOOST_TEST(train::bpe_token_name(" the") == "\\sthe");
  BOOST_TEST(train::bpe_token_name("a\nb\\") == "a\\nb\\\\");
  BOOST_TEST(train::bpe_token_name("\xF0\x9F") == "\\xF0\\x9F");
  BOOST_TEST(train::bpe_token_name("\xE6\x97\xA5") == "\xE6\x97\xA5");
  const Tokenizer t = Tokenizer::load(kDir + "tokenizer.json");
  BOOST_CHECK_THROW(t.token_bytes(t.vocab_size()), std::out_of_range);
  BOOST_CHECK_THROW(t.decode({-1}), std::out_of_range);
}

// A normalizer of Unicode normal forms (GPT-NeoX's and Pythia's tokenizer.json have NFC) applies to the text
// before the pre-tokenizer, as Hugging Face's tokenizers does: under NFC a decomposed "e" + U+0301 encodes as
// the precomposed U+00E9, under NFD the other way round, under NFKC the ligature U+FB01 as "fi". Added
// tokens are matched first, bytes that are not UTF-8 are kept, and ASCII is unchanged.
BOOST_AUTO_TEST_CASE(normalizers_apply_unicode_normal_forms) {
  testing::TempDir dir;
  nlohmann::json j = [] {
    std::ifstream in(kDir + "tokenizer.json");
    return nlohmann::json::parse(in);
  }();
  const Tokenizer plain = Tokenizer::from_tokenizer_json(kDir + "tokenizer.json");
  const auto with = [&](const nlohmann::json& normalizer) {
    j["normalizer"] = normalizer;
    write(dir.file("n.json"), j.dump());
    return Tokenizer::from_tokenizer_json(dir.file("n.json"));
  };
  const std::string composed = "caf\xC3\xA9 na\xC3\xAFve", decomposed = "cafe\xCC\x81 nai\xCC\x88ve";
  BOOST_TEST(plain.encode(composed) != plain.encode(decomposed));
  const Tokenizer nfc = with({{"type", "NFC"}});
  BOOST_TEST(nfc.encode(decomposed) == plain.encode(composed), boost::test_tools::per_element());
  BOOST_TEST(nfc.encode(composed) == plain.encode(composed), boost::test_tools::per_element());
  BOOST_TEST(nfc.decode(nfc.encode(decomposed)) == composed);
  const Tokenizer nfd = with({{"type", "NFD"}});
  BOOST_TEST(nfd.encode(composed) == plain.encode(decomposed), boost::test_tools::per_element());
  const Tokenizer nfkc = with({{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}});
  BOOST_TEST(nfkc.encode("\xEF\xAC\x81ne") == plain.encode("fine"), boost::test_tools::per_element());
  BOOST_TEST(nfkc.encode("fine") == plain.encode("fine"), boost::test_tools::per_element());
  // A long text is normalized in chunks cut only where no mark combines across the cut.
  std::string long_composed, long_decomposed;
  for (int i = 0; i < 6000; ++i) {
    long_composed += composed + (i % 7 ? " " : "\n");
    long_decomposed += decomposed + (i % 7 ? " " : "\n");
  }
  BOOST_TEST(long_decomposed.size() > 4 * 16384u);
  BOOST_TEST(nfc.encode(long_decomposed) == plain.encode(long_composed));
  // Bytes that are not UTF-8 pass through; the valid text around them is normalized.
  const std::string broken = "e\xCC\x81\xFF\xC3";
  BOOST_TEST(nfc.decode(nfc.encode(broken)) == "\xC3\xA9\xFF\xC3");
  // An added token is matched before normalizing; the text around it is normalized.
  const std::string eot = j["added_tokens"][0]["content"];
  std::vector<int32_t> want = plain.encode(composed);
  const std::vector<int32_t> eot_ids = plain.encode(eot);
  want.insert(want.end(), eot_ids.begin(), eot_ids.end());
  BOOST_TEST(eot_ids.size() == 1u);
  BOOST_TEST(nfc.encode(decomposed + eot) == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(broken_files_are_one_line_errors_naming_the_field) {
  testing::TempDir dir;
  const nlohmann::json good = [] {
    std::ifstream in(kDir + "tokenizer.json");
    return nlohmann::json::parse(in);
  }();
  const auto error_for = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    const std::string path = dir.file("t.json");
    write(path, j.dump());
    return error_of([&] { Tokenizer::from_tokenizer_json(path); });
  };
  const std::string p = dir.file("t.json") + ": ";
  BOOST_TEST(error_for([](auto& j) {
               j["model"]["type"] = "WordPiece";
             }).rfind(p + "/model/type: expected \"BPE\"", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["model"]["byte_fallback"] = true;
             }).rfind(p + "/model/byte_fallback: true is a SentencePiece", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
             }).rfind(p + "/pre_tokenizer/type: Metaspace is a SentencePiece", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["normalizer"] = {{"type", "Lowercase"}};
             }) ==
             p + "/normalizer/type: the normalizer \"Lowercase\" is not supported (NFC, NFD, NFKC, NFKD, "
                 "or a Sequence of them)");
  BOOST_TEST(
      error_for([](auto& j) {
        j["normalizer"] = {{"type", "Sequence"},
                           {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}}}};
      }).rfind(p + "/normalizer/normalizers/0/type: \"Prepend\" is the normalizer of a SentencePiece", 0) ==
      0);
  BOOST_TEST(error_for([](auto& j) { j["model"]["merges"][3] = "nospace"; }) ==
             p + "/model/merges/3: expected \"A B\" (two tokens and one space)");
  BOOST_TEST(error_for([](auto& j) {
               j["model"]["merges"][0] = "zz qq";
             }).rfind(p + "/model/merges/0: merges 'zz' and 'qq'", 0) == 0);
  BOOST_TEST(error_for([](auto& j) { j["model"]["vocab"].erase("A"); }).rfind(p + "/model/vocab: ", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["model"]["vocab"]["A"] = -4;
             }).rfind(p + "/model/vocab/A: expected a token id", 0) == 0);
  BOOST_TEST(error_for([](auto& j) { j["model"].erase("merges"); }) == p + "/model/merges: missing");
  BOOST_TEST(error_for([](auto& j) {
               j["added_tokens"][0]["content"] = "";
             }).rfind(p + "/added_tokens/0/content: ", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["pre_tokenizer"] = {{"type", "Split"},
                                     {"pattern", nlohmann::json::object({{"Regex", "(a"}})},
                                     {"behavior", "Isolated"}};
             }).rfind(p + "/pre_tokenizer/pattern/Regex: the pattern does not compile", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["pre_tokenizer"] = {{"type", "Split"},
                                     {"pattern", nlohmann::json::object({{"Regex", "a"}})},
                                     {"behavior", "Contiguous"}};
             }).rfind(p + "/pre_tokenizer/behavior: \"Contiguous\" is not supported", 0) == 0);
  BOOST_TEST(error_for([](auto& j) {
               j["pre_tokenizer"] = nullptr;
               j["decoder"] = nullptr;
             }).rfind(p + "/pre_tokenizer: no ByteLevel", 0) == 0);

  write(dir.file("bad.json"), "{\"model\": ");
  BOOST_TEST(error_of([&] {
               Tokenizer::load(dir.file("bad.json"));
             }).rfind(dir.file("bad.json") + ": line 1", 0) == 0);
  BOOST_TEST(error_of([&] { Tokenizer::load(dir.file("none.json")); }) ==
             dir.file("none.json") + ": cannot read (not a regular file)");
  BOOST_TEST(error_of([&] { Tokenizer::load(dir.dir.string()); }) ==
             dir.dir.string() + ": holds no tokenizer.json, nor vocab.json and merges.txt");
  write(dir.file("merges.txt"), "#version: 0.2\n\xC4\xA0 t\nonly\n");
  BOOST_TEST(error_of([&] { Tokenizer::from_vocab_merges(kDir + "vocab.json", dir.file("merges.txt")); }) ==
             dir.file("merges.txt") + ": line 3: expected \"A B\" (two tokens and one space)");
}
