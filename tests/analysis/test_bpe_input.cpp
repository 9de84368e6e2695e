// The byte-level BPE tokenizer in the task layer and the tools' text input: a pretrained run (an imported
// model's task, its tokenizer.json in the run folder) opens from wherever the folder is, names its tokens
// by the tokenizer, encodes a prompt with it (BOS from the tokenizer's post-processor, else <|endoftext|>)
// and refuses to draw data; GPT-2's vocab.json + merges.txt alone serve as its tokenizer; a text task with
// unit "bpe" trains on the tokenizer's ids; the config checks name the field.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/attention.h"
#include "analysis/tool.h"
#include "common/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/model_factory.h"
#include "train/tasks.h"
#include "train/tokenizer.h"

namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/tokenizer/";

// A pretrained run of a tiny random model over the Llama-3-layout fixture (which names a BOS), or with
// `files` copied into the run folder and task.tokenizer `tokenizer`.
std::string make_pretrained_run(const testing::TempDir& dir, int vocab,
                                const std::vector<std::string>& files = {"tokenizer_split.json"},
                                const std::string& tokenizer = "tokenizer.json",
                                const std::string& name = "run") {
  const std::string run = dir.file(name);
  const nlohmann::json doc = {
      {"name", "imported"},
      {"task", {{"kind", "pretrained"}, {"tokenizer", tokenizer}, {"length", 16}}},
      {"model",
       {{"d_model", 16}, {"n_heads", 2}, {"n_layers", 1}, {"d_ff", 32}, {"vocab", vocab}, {"max_len", 32}}},
      {"train", {{"eval_size", 8}, {"batch_size", 4}}}};
  const train::Config config = train::from_json(doc, "imported.json");
  BOOST_TEST(config.task.tokenizer == tokenizer);  // kept relative to the run folder
  const auto model = train::make_model<float>(config);
  train::save_model_run(run, config, *model, 0);
  for (const std::string& file : files)
    fs::copy_file(kFixtures + file, run + "/" + (file == "tokenizer_split.json" ? "tokenizer.json" : file));
  return run;
}

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find('\n') == std::string::npos);
    return what;
  }
  BOOST_FAIL("no error");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_pretrained_run_reads_its_tokenizer_from_its_folder) {
  testing::TempDir dir;
  const train::Tokenizer tokenizer = train::Tokenizer::load(kFixtures + "tokenizer_split.json");
  const std::string first = make_pretrained_run(dir, tokenizer.vocab_size() + 3);
  // The folder moves: the tokenizer path is relative to it.
  const std::string run_dir = dir.file("moved");
  fs::rename(first, run_dir);
  analysis::StudyRun run = analysis::open_run(run_dir);
  BOOST_TEST(run.task->vocab_size() == tokenizer.vocab_size());
  BOOST_TEST(run.task->token_name(*tokenizer.bos_id()) == "<|begin_of_text|>");
  const std::vector<int32_t> hello = tokenizer.encode("Hello world");
  BOOST_TEST(run.task->token_name(hello.back()) ==
             train::bpe_token_name(tokenizer.token_bytes(hello.back())));

  // Text input: encoded by the tokenizer, BOS put in front (with a note) where the tool adds it.
  analysis::Sequence input;
  input.text = "Hello world";
  std::vector<std::string> notes;
  std::vector<int32_t> want{*tokenizer.bos_id()};
  want.insert(want.end(), hello.begin(), hello.end());
  BOOST_TEST(analysis::input_ids(run, input, "input", analysis::Bos::kAdd, &notes) == want);
  BOOST_TEST(notes.size() == 1u);
  BOOST_TEST(analysis::input_ids(run, input, "input", analysis::Bos::kAsGiven) == hello);

  // forward on the prompt prints the tokenizer's names.
  analysis::ForwardRequest request;
  request.input = input;
  const auto out = analysis::forward(run, request);
  BOOST_TEST(out.result.probe.ids == std::vector<int>(hello.begin(), hello.end()));
  BOOST_TEST(out.result.probe.tokens.back() == train::bpe_token_name(tokenizer.token_bytes(hello.back())));
  BOOST_TEST(out.result.logits.front().size() == size_t(tokenizer.vocab_size() + 3));

  // Token names typed back name the same ids.
  analysis::Sequence names;
  names.tokens = out.result.probe.tokens[0] + " " + out.result.probe.tokens[1];
  BOOST_TEST(analysis::input_ids(run, names, "input", analysis::Bos::kAsGiven) ==
             (std::vector<int32_t>{hello[0], hello[1]}));

  // No data: drawing any is one line naming the kind.
  const std::string why = error_of([&] { run.task->eval_set(1, 4); });
  BOOST_TEST(why.rfind("/task/kind: pretrained has no training or held-out data", 0) == 0, why);
}

BOOST_AUTO_TEST_CASE(pretrained_configs_say_what_is_missing) {
  const auto error_for = [](nlohmann::json task, nlohmann::json model) {
    return error_of([&] { train::from_json({{"task", task}, {"model", model}}, "c.json"); });
  };
  const nlohmann::json model = {{"d_model", 16}, {"n_heads", 2}, {"vocab", 500}};
  BOOST_TEST(error_for({{"kind", "pretrained"}}, model) ==
             "c.json: /task/tokenizer: pretrained reads its vocabulary from a tokenizer: set task.tokenizer");
  BOOST_TEST(error_for({{"kind", "pretrained"}, {"tokenizer", "tokenizer.json"}}, {{"d_model", 16}})
                 .rfind("c.json: /model/vocab: 0 (follow the task) needs the task's tokenizer", 0) == 0);
  BOOST_TEST(error_for({{"kind", "pretrained"}, {"tokenizer", "t.json"}, {"path", "x.txt"}}, model)
                 .rfind("c.json: /task/path: pretrained has no data file", 0) == 0);
  BOOST_TEST(error_for({{"kind", "reverse"}, {"tokenizer", "t.json"}}, model)
                 .rfind("c.json: /task/tokenizer: only text (unit \"bpe\") and pretrained read a tokenizer",
                        0) == 0);
  BOOST_TEST(error_for({{"kind", "text"}, {"path", "README.md"}, {"unit", "bpe"}}, model)
                 .rfind("c.json: /task/tokenizer: unit \"bpe\" reads its tokens from a tokenizer", 0) == 0);
  // A config to train (load_config, a resume's overrides) is refused before any folder is made.
  const nlohmann::json pretrained = {{"task", {{"kind", "pretrained"}, {"tokenizer", "tokenizer.json"}}},
                                     {"model", model}};
  BOOST_TEST(error_of([&] {
               train::from_json(pretrained, "c.json", {});
             }).rfind("c.json: /task/kind: \"pretrained\" has no training data", 0) == 0);
  // An absolute tokenizer path is read when the config is: its errors name the file and field.
  BOOST_TEST(error_for({{"kind", "pretrained"}, {"tokenizer", kFixtures + "missing.json"}}, model) ==
             "c.json: /task/tokenizer: " + kFixtures + "missing.json: cannot read (not a regular file)");
}

BOOST_AUTO_TEST_CASE(text_with_unit_bpe_trains_on_the_tokenizers_ids) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "It's the " + std::to_string(i) + "th line, caf\xC3\xA9 \xF0\x9F\x8D\x95!\n";
  const std::string path = dir.file("text.txt");
  std::ofstream(path) << text;
  const nlohmann::json doc = {{"task",
                               {{"kind", "text"},
                                {"path", path},
                                {"unit", "bpe"},
                                {"tokenizer", kFixtures + "tokenizer.json"},
                                {"length", 8}}},
                              {"model", {{"d_model", 16}, {"n_heads", 2}}}};
  const train::Config config = train::from_json(doc, "text.json");
  const train::Tokenizer tokenizer = train::Tokenizer::load(kFixtures + "tokenizer.json");
  BOOST_TEST(config.model.vocab == tokenizer.vocab_size());
  const auto task = train::make_task(config.task, config.seed);
  BOOST_REQUIRE(task->tokenizer() != nullptr);
  BOOST_TEST(*task->encode_text("caf\xC3\xA9 \xF0\x9F\x8D\x95") ==
             tokenizer.encode("caf\xC3\xA9 \xF0\x9F\x8D\x95"));
  BOOST_TEST(task->decode(tokenizer.encode(text)) == text);
  BOOST_TEST(!task->bos_id().has_value());
  // Every name is unique and names its own id.
  for (int id = 0; id < task->vocab_size(); ++id) BOOST_TEST(*task->token_id(task->token_name(id)) == id);
  // A training window is 9 consecutive ids of the encoded file.
  ag::Rng rng(1);
  const train::Batch batch = task->sample(rng, 2);
  const std::vector<int32_t> all = tokenizer.encode(text);
  const std::vector<int32_t> row(batch.inputs.begin(), batch.inputs.begin() + 8);
  BOOST_TEST((std::search(all.begin(), all.end(), row.begin(), row.end()) != all.end()));
}

// GPT-2's vocab.json + merges.txt alone in the run folder (task.tokenizer ".", as `attograd import` writes
// it for such a folder) give the ids of the same vocabulary's tokenizer.json; neither names a BOS in a
// post-processor, so the pretrained task's BOS is <|endoftext|>, as TransformerLens prepends it. An answer
// may be the text of one token.
BOOST_AUTO_TEST_CASE(gpt2s_pair_alone_is_a_pretrained_tokenizer_with_endoftext_as_bos) {
  testing::TempDir dir;
  const train::Tokenizer tokenizer = train::Tokenizer::load(kFixtures + "tokenizer.json");
  const int vocab = tokenizer.vocab_size();
  analysis::StudyRun pair =
      analysis::open_run(make_pretrained_run(dir, vocab, {"vocab.json", "merges.txt"}, ".", "pair"));
  analysis::StudyRun json =
      analysis::open_run(make_pretrained_run(dir, vocab, {"tokenizer.json"}, "tokenizer.json", "json"));
  const nlohmann::json texts = nlohmann::json::parse(std::ifstream(kFixtures + "encodings.json")).at("texts");
  for (const auto& t : texts) {
    const std::string text = t.at("text");
    BOOST_TEST(pair.task->encode_text(text).value() == json.task->encode_text(text).value(), text);
  }
  const std::optional<int> eot = json.task->token_id("<|endoftext|>");
  BOOST_TEST_REQUIRE(eot.has_value());
  BOOST_TEST(pair.task->bos_id().value_or(-1) == *eot);
  BOOST_TEST(json.task->bos_id().value_or(-1) == *eot);
  analysis::Sequence input;
  input.text = "Hello world";
  std::vector<std::string> notes;
  const std::vector<int32_t> ids = analysis::input_ids(pair, input, "input", analysis::Bos::kAdd, &notes);
  BOOST_TEST(ids.front() == *eot);
  BOOST_TEST(notes.size() == 1u);
  BOOST_TEST(notes[0].find("<|endoftext|>") != std::string::npos, notes[0]);

  analysis::Token answer;
  answer.name = " the";
  BOOST_TEST(analysis::token_id(pair, answer, "answer") == *pair.task->token_id("\\sthe"));
  answer.name = " tthhee";
  const std::string why = error_of([&] { analysis::token_id(pair, answer, "answer"); });
  BOOST_TEST(why.rfind("answer: unknown token ' tthhee' (as text it is ", 0) == 0, why);
}
