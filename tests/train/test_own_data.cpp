// The user's own data and finite datasets (train/task.h, train/tasks/sequences.cpp, train/tasks/text.cpp):
// every bad sequence file is one line naming the file, the line and the field; the split has exactly the
// stated sizes, depends on the seed only, and training batches never hold a held-out sequence; epochs visit
// each training sequence once; batch_size 0 is the whole set; short sequences are padded at the end and the
// padding changes no real position's logits; text windows come from their own region.
#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/temp_dir.h"
#include "nn/transformer.h"
#include "train/config.h"
#include "train/model_factory.h"
#include "train/tasks.h"
#include "train/training_step.h"

using train::Batch;
using train::Task;
using train::TaskConfig;
using Sequence = std::vector<int32_t>;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TaskConfig sequences_config(const std::string& path, double fraction = 0.5) {
  TaskConfig config;
  config.kind = "sequences";
  config.path = path;
  config.train_fraction = fraction;
  return config;
}

// The message of the TaskDataError that building the task throws, or "" when it builds.
std::string data_error(const TaskConfig& config, uint64_t seed = 1) {
  try {
    train::make_task(config, seed);
  } catch (const train::TaskDataError& e) {
    return e.what();
  }
  return "";
}

// Ten lines of four tokens each, "BOS x y =" with different x.
std::string ten_lines() {
  std::string text;
  for (int i = 0; i < 10; ++i)
    text += "{\"tokens\": [\"BOS\", \"t" + std::to_string(i) + "\", \"y\", \"z\"], \"scored\": [3]}\n";
  return text;
}

// Row b of a batch as (inputs up to the padding, scored targets).
Sequence row_inputs(const Batch& batch, int b) {
  Sequence row(batch.inputs.begin() + b * batch.T, batch.inputs.begin() + (b + 1) * batch.T);
  if (!batch.is_padding.empty()) {
    int t = 0;
    while (t < batch.T && !batch.is_padding[b * batch.T + t]) ++t;
    row.resize(t);
  }
  return row;
}

std::set<Sequence> rows(const Batch& batch) {
  std::set<Sequence> out;
  for (int b = 0; b < batch.B; ++b) out.insert(row_inputs(batch, b));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_bad_sequence_file_names_the_file_the_line_and_the_field) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl");
  const std::string good = "{\"tokens\": [\"a\", \"b\"]}\n";
  struct Case {
    std::string text;
    std::string expected;  // the message after "/task/path: PATH:"
  };
  const std::vector<Case> cases = {
      {good + "{\"tokens\": [\"a\", \"b\"\n", "2: not a JSON value (one JSON object a line)"},
      {good + "[1, 2]\n", "2: expected a JSON object, got array"},
      {good + "{\"tokens\": [\"a\", \"b\"], \"scored\": " + std::string(200000, '[') +
           std::string(200000, ']') + "}\n",
       "2: line 1, column 97: nested deeper than 64 levels"},
      {good + "{\"tokens\": [\"a\", \"b\"], \"split\": \"train\", \"split\": \"heldout\"}\n",
       "2: /split: duplicate key"},
      {good + "{\"tokens\": [\"a\", \"b\"], \"weight\": 2}\n",
       "2: /weight: unknown key; expected tokens (with scored), or prompt and completion; split"},
      {good + "{\"tokens\": []}\n", "2: /tokens: expected at least one token, got an empty array"},
      {good + "{\"tokens\": [\"a\"]}\n",
       "2: /tokens: expected at least 2 tokens (a first one and one to predict)"},
      {good + "\n{\"tokens\": [\"a\", \"b\", \"c\"], \"scored\": [3]}\n",
       "3: /scored/0: 3 is outside 1..2 (the indices of the tokens to predict; token 0 has nothing before "
       "it)"},
      {good + "{\"tokens\": [\"a\", \"b\", \"c\"], \"scored\": [0]}\n",
       "2: /scored/0: 0 is outside 1..2 (the indices of the tokens to predict; token 0 has nothing before "
       "it)"},
      {good + "{\"tokens\": [\"a\", \"b\", \"c\"], \"scored\": [2, 2]}\n", "2: /scored/1: 2 is scored twice"},
      {good + "{\"tokens\": [\"a\", \"b c\"]}\n",
       "2: /tokens/1: expected 1 to 256 bytes without white space or control characters, got \"b c\""},
      {good + "{\"tokens\": [\"a\", 7]}\n", "2: /tokens/1: expected a token string, got 7"},
      // A control byte the file spells as an escape is quoted escaped: the error stays one printable line.
      {good + "{\"tokens\": [\"a\", \"\\u007f\"]}\n",
       "2: /tokens/1: expected 1 to 256 bytes without white space or control characters, got \"\\x7f\""},
      {good + "{\"tokens\": [\"a\", \"b\"], \"\\u001b[2J\": 1}\n",
       "2: /\\x1b[2J: unknown key; expected tokens (with scored), or prompt and completion; split"},
      {good + "{\"prompt\": [\"a\"]}\n", "2: /completion: missing: a prompt needs its completion"},
      {good + "{\"tokens\": [\"a\", \"b\"], \"prompt\": [\"a\"], \"completion\": [\"b\"]}\n",
       "2: expected either \"tokens\" or \"prompt\" and \"completion\""},
      {good + "{\"tokens\": [\"a\", \"b\"], \"split\": \"test\"}\n",
       "2: /split: expected \"train\" or \"heldout\", got \"test\""},
      {"\n\n", "no sequences (one JSON object a line)"},
  };
  for (const Case& c : cases) {
    write(path, c.text);
    const std::string expected_start = "/task/path: " + path + (c.expected[0] == 'n' ? ": " : ":");
    BOOST_TEST(data_error(sequences_config(path)) == expected_start + c.expected, c.text.substr(0, 200));
  }
}

BOOST_AUTO_TEST_CASE(a_split_field_is_all_or_nothing_and_each_side_keeps_two_lines) {
  testing::TempDir dir;
  const std::string path = dir.file("split.jsonl");
  write(path, "{\"tokens\": [\"a\", \"b\"], \"split\": \"train\"}\n{\"tokens\": [\"a\", \"c\"]}\n");
  BOOST_TEST(data_error(sequences_config(path, 0)) ==
             "/task/path: " + path + ":2: /split: missing: line 1 names a split, so every line must");

  std::string text;
  for (int i = 0; i < 5; ++i)
    text += "{\"tokens\": [\"a\", \"t" + std::to_string(i) + "\"], \"split\": \"" +
            (i < 4 ? "train" : "heldout") + "\"}\n";
  write(path, text);
  BOOST_TEST(data_error(sequences_config(path, 0)) ==
             "/task/path: " + path +
                 ": the split leaves 4 training and 1 held-out sequences; each side needs at least 2");
  BOOST_TEST(data_error(sequences_config(path, 0.5)) ==
             "/task/train_fraction: " + path + " names each line's split; drop task.train_fraction");

  write(path, ten_lines());
  BOOST_TEST(data_error(sequences_config(path, 0.05)) ==
             "/task/train_fraction: " + path +
                 ": the split leaves 1 training and 9 held-out sequences; each side needs at least 2");
  BOOST_TEST(
      data_error(sequences_config(path, 0)).find("/task/train_fraction: expected a fraction in (0, 1)") == 0);
}

BOOST_AUTO_TEST_CASE(a_vocab_file_fixes_the_ids_and_must_hold_every_token) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl"), vocab = dir.file("vocab.txt");
  write(path, ten_lines());
  TaskConfig config = sequences_config(path);
  config.vocab_file = vocab;
  std::string names = "z\ny\nBOS\n";
  for (int i = 9; i >= 0; --i) names += "t" + std::to_string(i) + "\n";
  write(vocab, names);
  const auto task = train::make_task(config, 1);
  BOOST_TEST(task->vocab_size() == 13);
  BOOST_TEST(task->token_name(0) == "z");
  BOOST_TEST(*task->token_id("BOS") == 2);
  BOOST_TEST(*task->token_id("t0") == 12);

  write(vocab, "z\ny\nBOS\nt1\n");
  BOOST_TEST(data_error(config) == "/task/path: " + path + ":1: /tokens/1: \"t0\" is not in " + vocab);
  write(vocab, "z\ny\nz\n");
  BOOST_TEST(data_error(config) ==
             "/task/vocab_file: " + vocab + ":3: token \"z\" is listed twice (first at line 1)");
}

BOOST_AUTO_TEST_CASE(a_fifo_a_folder_and_an_oversized_file_are_refused_before_reading) {
  testing::TempDir dir;
  const std::string fifo = dir.file("fifo.jsonl");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_TEST(data_error(sequences_config(fifo)) ==
             "/task/path: " + fifo + ": expected a regular file (not a folder, FIFO or device)");
  BOOST_TEST(data_error(sequences_config(dir.file(""))).find("expected a regular file") != std::string::npos);
  const std::string big = dir.file("big.jsonl");
  { std::ofstream(big) << ""; }
  std::filesystem::resize_file(big, (64 << 20) + 1);  // sparse: no 64 MiB written
  BOOST_TEST(data_error(sequences_config(big)) ==
             "/task/path: " + big + ": 67108865 bytes, over the limit of 67108864");
  BOOST_TEST(data_error(sequences_config(dir.file("missing.jsonl"))) ==
             "/task/path: " + dir.file("missing.jsonl") + ": cannot read: No such file or directory");
}

BOOST_AUTO_TEST_CASE(a_config_names_the_line_too_long_for_max_len) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl"), config = dir.file("c.json");
  write(path, ten_lines() + "{\"tokens\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]}\n");
  write(config, "{\"task\": {\"kind\": \"sequences\", \"path\": \"" + path +
                    "\", \"train_fraction\": 0.5}, \"model\": {\"max_len\": 4}}");
  try {
    train::load_config(config);
    BOOST_FAIL("a line over max_len + 1 tokens was accepted");
  } catch (const train::ConfigError& e) {
    BOOST_TEST(std::string(e.what()) ==
               config +
                   ": /model/max_len: 4 is shorter than the task's sequence length 5 (line "
                   "11 of " +
                   path + " has 6 tokens) (0 = follow the task)");
  }
  write(config, "{\"task\": {\"kind\": \"sequences\", \"path\": \"" + path + "\", \"train_fraction\": 0.5}}");
  BOOST_TEST(train::load_config(config).model.max_len == 5);
}

BOOST_AUTO_TEST_CASE(the_split_has_exactly_the_stated_size_and_depends_on_the_seed_only) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl");
  std::string text;
  for (int i = 0; i < 101; ++i)
    text += "{\"prompt\": [\"p" + std::to_string(i) + "\"], \"completion\": [\"c\"]}\n";
  write(path, text);
  const auto a = train::make_task(sequences_config(path, 0.3), 5);
  BOOST_TEST(a->finite());
  BOOST_TEST(a->split_size(false) == 30);  // round(0.3 * 101)
  BOOST_TEST(a->split_size(true) == 71);
  std::vector<int64_t> all = a->split_ids(false);
  const std::vector<int64_t> held = a->split_ids(true);
  all.insert(all.end(), held.begin(), held.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < 101; ++i) BOOST_TEST(all[i] == i + 1);  // line numbers from 1, each once
  BOOST_TEST(train::make_task(sequences_config(path, 0.3), 5)->split_ids(false) == a->split_ids(false));
  BOOST_TEST(train::make_task(sequences_config(path, 0.3), 6)->split_ids(false) != a->split_ids(false));
  BOOST_TEST(a->split_id_meaning() == "line");
}

BOOST_AUTO_TEST_CASE(modadd_with_a_train_fraction_enumerates_every_pair_and_never_trains_on_a_held_out_one) {
  TaskConfig config{"modadd", 23, 2};
  config.train_fraction = 0.3;
  const auto task = train::make_task(config, 42);
  BOOST_TEST(task->split_size(false) == 159);  // round(0.3 * 529)
  BOOST_TEST(task->split_size(true) == 370);
  const std::set<Sequence> train_rows = rows(task->split_set(false, 1000));
  const std::set<Sequence> held_rows = rows(task->split_set(true, 1000));
  BOOST_TEST(train_rows.size() == 159u);
  BOOST_TEST(held_rows.size() == 370u);
  for (const Sequence& s : train_rows) BOOST_TEST(held_rows.count(s) == 0u);
  // Every pair once: the enumeration is the whole space.
  std::set<std::pair<int, int>> pairs;
  for (const auto* side : {&train_rows, &held_rows})
    for (const Sequence& s : *side) pairs.insert({s[1], s[3]});
  BOOST_TEST(pairs.size() == 529u);
  // The held-out evaluation is exactly the held-out pairs.
  BOOST_TEST(rows(task->eval_set(42, 100000)) == held_rows);

  // Batches of 64 over several epochs, and the full batch: only training pairs, and each epoch visits each
  // once. 159 is not a multiple of 64, so batches straddle epochs.
  ag::Rng unused(0);
  std::map<Sequence, int> visits;
  const int steps = 159 * 4 / 64 + 1;
  for (int step = 0; step < steps; ++step) {
    const Batch batch = task->training_batch(step, 64, unused);
    BOOST_TEST(batch.B == 64);
    for (int b = 0; b < batch.B; ++b) {
      const Sequence row = row_inputs(batch, b);
      BOOST_TEST(train_rows.count(row) == 1u);
      if (step * 64 + b < 159 * 4) ++visits[row];
    }
  }
  BOOST_TEST(visits.size() == 159u);
  for (const auto& [row, n] : visits) BOOST_TEST(n == 4);
  // A step's batch depends on the step alone: what a resumed run draws.
  const auto again = train::make_task(config, 42);
  BOOST_TEST(again->training_batch(7, 64, unused).inputs == task->training_batch(7, 64, unused).inputs);
  BOOST_TEST(task->training_batch(7, 64, unused).inputs != task->training_batch(8, 64, unused).inputs);
  const Batch full = task->training_batch(3, 0, unused);
  BOOST_TEST(full.B == 159);
  BOOST_TEST(rows(full) == train_rows);
}

BOOST_AUTO_TEST_CASE(a_kind_that_cannot_enumerate_refuses_a_train_fraction) {
  TaskConfig induction{"induction", 32, 16};
  induction.train_fraction = 0.5;
  BOOST_TEST(data_error(induction).find("/task/train_fraction: induction at this vocab and length cannot be "
                                        "enumerated") == 0);
  TaskConfig big{"copy", 10, 8};  // 10^8 prompts
  big.train_fraction = 0.5;
  BOOST_TEST(!data_error(big).empty());
  TaskConfig small{"copy", 10, 3};
  small.train_fraction = 0.5;
  BOOST_TEST(train::make_task(small, 1)->split_size(false) == 500);
}

BOOST_AUTO_TEST_CASE(batch_size_0_needs_a_finite_dataset_and_evaluates_every_held_out_sequence) {
  const std::string modadd = std::string(ATTOGRAD_SOURCE_DIR) + "/configs/modadd.json";
  try {
    train::load_config(modadd, {"train.batch_size=0"});
    BOOST_FAIL("batch_size 0 on a stream was accepted");
  } catch (const train::ConfigError& e) {
    BOOST_TEST(
        std::string(e.what()) ==
        "--set train.batch_size=0: /train/batch_size: 0 (the whole training set) needs a finite dataset: "
        "task.train_fraction, or a sequences file");
  }
  const train::Config config = train::load_config(modadd, {"train.batch_size=0", "task.train_fraction=0.3"});
  BOOST_TEST(config.train.eval_size == 370);
  BOOST_TEST(config.train.batch_size == 0);
  BOOST_TEST((train::from_json(train::to_json(config)) == config));
}

BOOST_AUTO_TEST_CASE(short_sequences_are_padded_at_the_end_and_padding_changes_no_real_logit) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl");
  std::string text;
  for (int i = 0; i < 8; ++i) {
    text += "{\"tokens\": [\"BOS\"";
    for (int k = 0; k <= i % 4; ++k) text += ", \"t" + std::to_string((i + k) % 5) + "\"";
    text +=
        ", \"=\", \"t" + std::to_string(i % 5) + "\"], \"scored\": [" + std::to_string(i % 4 + 3) + "]}\n";
  }
  write(path, text);
  train::Config config;
  config.task = sequences_config(path, 0.5);
  const auto task = train::make_task(config.task, 3);
  BOOST_TEST(task->seq_len() == 6);  // the longest line: BOS + 4 + "=" + answer
  const Batch batch = task->split_set(false, 4);
  BOOST_REQUIRE(batch.is_padding.size() == batch.inputs.size());
  config.model.vocab = task->vocab_size();
  config.model.max_len = task->seq_len();
  config.model.d_model = 16;
  config.model.n_heads = 2;
  config.model.d_ff = 32;
  const auto model = train::make_model<double>(config);
  const ag::Tensor<double> logits = model->forward(batch.inputs, batch.B, batch.T);  // the training forward
  const int64_t V = task->vocab_size();
  for (int b = 0; b < batch.B; ++b) {
    const Sequence alone = row_inputs(batch, b);
    const int length = static_cast<int>(alone.size());
    BOOST_TEST(length < 6 + 1);
    for (int t = length; t < batch.T; ++t) {
      BOOST_TEST(batch.is_padding[b * batch.T + t] == 1);
      BOOST_TEST(batch.targets[b * batch.T + t] == -1);  // padding is never scored
    }
    const int scored = length - 1;  // each line scores its last token
    BOOST_TEST(batch.targets[b * batch.T + scored] >= 0);
    const ag::Tensor<double> own = model->forward(alone, 1, length);
    for (int t = 0; t < length; ++t)
      for (int64_t v = 0; v < V; ++v)
        BOOST_TEST(own.data()[t * V + v] == logits.data()[(b * batch.T + t) * V + v],
                   boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(text_names_its_characters_and_draws_windows_from_its_own_region) {
  testing::TempDir dir;
  const std::string path = dir.file("text.txt");
  // 540 characters of "ab\n", then 60 of "x y\é\n": with the default 90% cut, training windows never hold
  // x, y or é and held-out windows never hold a or b.
  std::string text;
  for (int i = 0; i < 180; ++i) text += "ab\n";
  for (int i = 0; i < 10; ++i) text += "x y\\é\n";
  write(path, text);
  TaskConfig config;
  config.kind = "text";
  config.path = path;
  config.length = 4;
  const auto task = train::make_task(config, 1);
  std::vector<std::string> names;
  for (int id = 0; id < task->vocab_size(); ++id) names.push_back(task->token_name(id));
  BOOST_TEST(names == (std::vector<std::string>{"\\n", "\\s", "\\\\", "a", "b", "x", "y", "é"}),
             boost::test_tools::per_element());
  const auto ids = task->encode_text("ab\\é");
  BOOST_REQUIRE(ids.has_value());
  BOOST_TEST(task->decode(*ids) == "ab\\é");
  BOOST_CHECK_EXCEPTION(task->encode_text("aq"), std::invalid_argument, [&](const std::invalid_argument& e) {
    return std::string(e.what()) == "'q' does not occur in " + path + ", so the model has no token for it";
  });
  ag::Rng rng(1);
  const Batch batch = task->training_batch(0, 64, rng);
  BOOST_TEST(batch.T == 4);
  for (int32_t id : batch.inputs) BOOST_TEST(id <= 4);  // \n, \s, \\, a, b: x, y and é only after the cut
  for (int32_t t : batch.targets) BOOST_TEST(t >= 0);   // every position scored
  const Batch held = task->eval_set(1, 64);
  const int32_t a = *task->token_id("a");
  int held_a = 0;
  for (int32_t id : held.inputs) held_a += id == a;
  BOOST_TEST(held_a == 0);

  write(path, std::string("ab\n\xff\n"));
  BOOST_TEST(data_error(config) ==
             "/task/path: " + path +
                 ":2: byte 3 is not valid UTF-8 (use task.unit \"byte\" for binary text)");
  config.unit = "byte";
  write(path, text + "\xff\n");
  const auto bytes = train::make_task(config, 1);
  BOOST_TEST(*bytes->token_id("\\xFF") == bytes->vocab_size() - 1);
  config.length = 100;
  BOOST_TEST(data_error(config).find("each side needs a window of task.length + 1 = 101") !=
             std::string::npos);
}

// A sequences file appended to between reading the config (which resolves model.vocab and max_len from it)
// and building the training: one line naming the file, where the embedding used to fail on an id it lacks
// ("embedding: id 8220 is outside [0, V)"), naming nothing.
BOOST_AUTO_TEST_CASE(a_data_file_changed_after_the_config_was_read_is_named) {
  testing::TempDir dir;
  const std::string path = dir.file("data.jsonl"), config_path = dir.file("c.json");
  write(path, ten_lines());
  write(config_path, "{\"task\": {\"kind\": \"sequences\", \"path\": \"" + path +
                         "\", \"train_fraction\": 0.5}, \"model\": {\"d_model\": 16, \"n_heads\": 2, "
                         "\"n_layers\": 1, \"d_ff\": 32}}");
  const train::Config config = train::load_config(config_path);
  std::ofstream(path, std::ios::app) << "{\"tokens\": [\"BOS\", \"new\", \"y\", \"z\"]}\n";
  try {
    train::TrainingStep step(config);
    BOOST_FAIL("a data file that changed under the command was trained on");
  } catch (const std::exception& e) {
    BOOST_TEST(std::string(e.what()).find("task.path " + path + ": changed after the config was read") == 0,
               e.what());
  }
  // Unchanged, the same config trains.
  write(path, ten_lines());
  BOOST_CHECK_NO_THROW(train::TrainingStep{config});
}
