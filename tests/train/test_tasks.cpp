#include <boost/test/unit_test.hpp>

// The toy tasks. Every registered kind, read from the registry: its entry, well-formed batches, the scored
// mask, token names, determinism, its minimum length and its row in docs/configs.md. Then each kind's own
// format and sizes and its ideal attention keys on hand-built sequences; the held-out split and its own
// stream; validation messages; exact-match accuracy.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "train/evaluate.h"
#include "train/tasks.h"

using ag::Rng;
using train::Batch;
using train::Task;
using train::TaskConfig;
using Sequence = std::vector<int32_t>;

namespace {

std::unique_ptr<Task> task_of(const std::string& kind, int vocab, int length) {
  return train::make_task(TaskConfig{kind, vocab, length}, 1);
}

// Sequence b of the batch as the task wrote it (T + 1 ids): the inputs plus the last target. Every task
// scores its last position, so the last token is always there.
Sequence full_sequence(const Batch& batch, int b) {
  Sequence sequence(batch.inputs.begin() + b * batch.T, batch.inputs.begin() + (b + 1) * batch.T);
  sequence.push_back(batch.targets[(b + 1) * batch.T - 1]);
  return sequence;
}

// The values of ids [first, last) of a sequence, as the task names them.
std::vector<int> values(const Task& task, const Sequence& sequence, int first, int last) {
  std::vector<int> out;
  for (int i = first; i < last; ++i) out.push_back(std::stoi(task.token_name(sequence[i])));
  return out;
}

// Checks what every task shares: sizes, targets -1 exactly off the scored positions, and on them the next
// input token (the causal-LM shift).
void check_batch_shape(const Task& task, const Batch& batch, int batch_size) {
  BOOST_TEST(batch.B == batch_size);
  BOOST_TEST(batch.T == task.seq_len());
  BOOST_REQUIRE(batch.inputs.size() == size_t(batch.B * batch.T));
  BOOST_REQUIRE(batch.targets.size() == size_t(batch.B * batch.T));
  BOOST_TEST(std::count(task.scored_positions().begin(), task.scored_positions().end(), task.seq_len() - 1) ==
             1);
  for (int b = 0; b < batch.B; ++b) {
    const Sequence sequence = full_sequence(batch, b);
    const std::vector<int> row_scored = task.scored_positions_of(sequence);
    const std::set<int> scored(row_scored.begin(), row_scored.end());
    // The positions every sequence scores are scored in this one too.
    for (int t : task.scored_positions()) BOOST_TEST(scored.count(t) == 1u);
    for (int t = 0; t < batch.T; ++t) {
      const int32_t input = batch.inputs[b * batch.T + t];
      const int32_t target = batch.targets[b * batch.T + t];
      BOOST_TEST((input >= 0 && input < task.vocab_size()));
      if (!scored.count(t)) {
        BOOST_TEST(target == -1);
      } else {
        BOOST_TEST((target >= 0 && target < task.vocab_size()));
        if (t + 1 < batch.T) BOOST_TEST(target == batch.inputs[b * batch.T + t + 1]);
      }
    }
  }
}

std::vector<int> range(int first, int last) {
  std::vector<int> out;
  for (int i = first; i <= last; ++i) out.push_back(i);
  return out;
}

// The kinds that generate their own sequences; the kinds that read a file (sequences, text) have their
// own tests in test_own_data.cpp, since they have no vocab or length to size them by.
std::vector<std::string> generator_kinds() {
  std::vector<std::string> kinds;
  for (const train::TaskKind& kind : train::task_registry())
    if (!kind.reads_file) kinds.push_back(kind.name);
  return kinds;
}

// A small config the kind accepts: the first of a few sizes that find_task_problem passes.
TaskConfig small_config(const std::string& kind) {
  for (const auto& [vocab, length] : std::vector<std::pair<int, int>>{{12, 6}, {12, 3}, {16, 8}, {32, 12}}) {
    const TaskConfig config{kind, vocab, length};
    if (!train::find_task_problem(config)) return config;
  }
  BOOST_FAIL(kind << " accepts none of the small configs the tests try");
  return {};
}

}  // namespace

// ---- Every registered task ----

BOOST_AUTO_TEST_CASE(the_registry_names_each_kind_once_with_its_entry_complete) {
  const auto& registry = train::task_registry();
  BOOST_TEST_REQUIRE(!registry.empty());
  std::vector<std::string> names;
  for (const train::TaskKind& kind : registry) {
    BOOST_TEST_CONTEXT(kind.name) {
      BOOST_TEST(!kind.name.empty());
      BOOST_TEST(std::count(names.begin(), names.end(), kind.name) == 0);
      // One line for docs and --help.
      BOOST_TEST(!kind.format.empty());
      BOOST_TEST(kind.format.find('\n') == std::string::npos);
      BOOST_TEST(kind.min_length >= 1);
      BOOST_TEST(kind.log10_distinct_sequences != nullptr);
      BOOST_TEST(kind.make != nullptr);
      names.push_back(kind.name);
    }
  }
  BOOST_TEST(train::task_kinds() == names);
}

BOOST_AUTO_TEST_CASE(every_task_samples_well_formed_batches) {
  for (const std::string& kind : generator_kinds()) {
    BOOST_TEST_CONTEXT(kind) {
      const TaskConfig config = small_config(kind);
      const auto task = train::make_task(config, 1);
      BOOST_TEST(task->config().kind == kind);
      BOOST_TEST(!task->describe().empty());
      BOOST_TEST(task->vocab_size() >= config.vocab);
      BOOST_TEST(train::log10_distinct_sequences(config) >= std::log10(50.0));
      Rng rng(1);
      const Batch batch = task->sample(rng, 16);
      check_batch_shape(*task, batch, 16);
      check_batch_shape(*task, task->eval_set(1, 16), 16);
      // Ideal keys: one list per input position, causal, and only on the rows the sequence scores.
      for (int b = 0; b < batch.B; ++b) {
        const Sequence sequence = full_sequence(batch, b);
        const Sequence inputs(sequence.begin(), sequence.end() - 1);
        const auto keys = task->ideal_keys(inputs);
        BOOST_REQUIRE(keys.size() == size_t(task->seq_len()));
        const std::vector<int> scored = task->scored_positions_of(sequence);
        for (int t = 0; t < task->seq_len(); ++t) {
          for (int key : keys[t]) BOOST_TEST((key >= 0 && key <= t));
          if (!keys[t].empty()) BOOST_TEST(std::count(scored.begin(), scored.end(), t) == 1);
        }
      }
      BOOST_CHECK_THROW(task->ideal_keys(Sequence(task->seq_len() + 1, 0)), std::invalid_argument);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_task_names_its_tokens_both_ways) {
  for (const std::string& kind : generator_kinds()) {
    BOOST_TEST_CONTEXT(kind) {
      const auto task = train::make_task(small_config(kind), 1);
      for (int id = 0; id < task->vocab_size(); ++id) BOOST_TEST(*task->token_id(task->token_name(id)) == id);
      BOOST_CHECK_THROW(task->token_name(task->vocab_size()), std::out_of_range);
    }
  }
}

BOOST_AUTO_TEST_CASE(same_seed_same_batch) {
  for (const std::string& kind : generator_kinds()) {
    BOOST_TEST_CONTEXT(kind) {
      const auto task = train::make_task(small_config(kind), 1);
      Rng a(7), b(7), c(8);
      const Batch first = task->sample(a, 16);
      const Batch again = task->sample(b, 16);
      BOOST_TEST(first.inputs == again.inputs);
      BOOST_TEST(first.targets == again.targets);
      BOOST_TEST(task->sample(c, 16).inputs != first.inputs);
      BOOST_TEST(task->eval_set(7, 16).inputs == task->eval_set(7, 16).inputs);
      BOOST_TEST(task->eval_set(7, 16).inputs != task->eval_set(8, 16).inputs);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_task_refuses_a_length_below_its_minimum) {
  for (const train::TaskKind& kind : train::task_registry()) {
    if (kind.reads_file) continue;  // its length is not a prompt's (test_own_data.cpp)
    BOOST_TEST_CONTEXT(kind.name) {
      TaskConfig config = small_config(kind.name);
      config.length = kind.min_length - 1;
      const auto problem = train::find_task_problem(config);
      BOOST_REQUIRE(problem.has_value());
      BOOST_TEST(problem->field == "length");
      BOOST_TEST(problem->message == kind.name + " needs length >= " + std::to_string(kind.min_length) +
                                         ", got " + std::to_string(kind.min_length - 1));
      BOOST_CHECK_THROW(train::make_task(config, 1), std::invalid_argument);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_kind_is_refused_with_every_registered_kind) {
  const auto problem = train::find_task_problem(TaskConfig{"nope", 10, 8});
  BOOST_REQUIRE(problem.has_value());
  BOOST_TEST(problem->field == "kind");
  std::string expected;
  for (const std::string& kind : train::task_kinds()) expected += (expected.empty() ? "" : ", ") + kind;
  BOOST_TEST(problem->message == "unknown task \"nope\"; expected one of " + expected);
  BOOST_CHECK_THROW(train::make_task(TaskConfig{"nope", 10, 8}, 1), std::invalid_argument);
  BOOST_CHECK_THROW(train::log10_distinct_sequences(TaskConfig{"nope", 10, 8}), std::invalid_argument);
}

// docs/configs.md's task table has one row per registered kind and no other.
BOOST_AUTO_TEST_CASE(the_docs_task_table_lists_every_registered_kind) {
  std::ifstream in(std::string(ATTOGRAD_SOURCE_DIR) + "/docs/configs.md");
  BOOST_TEST_REQUIRE(in.good());
  std::string line;
  bool in_table = false;
  std::vector<std::string> rows;
  while (std::getline(in, line)) {
    if (line.rfind("| kind | sequence |", 0) == 0)
      in_table = true;
    else if (in_table && line.rfind("| `", 0) == 0)
      rows.push_back(line.substr(3, line.find('`', 3) - 3));
    else if (in_table && line.rfind("|", 0) != 0)
      break;
  }
  BOOST_TEST(rows == train::task_kinds(),
             "docs/configs.md's task table must list the registry's kinds in order");
}

// ---- Each task's own format ----

BOOST_AUTO_TEST_CASE(copy_reverse_sort_formats) {
  const int n = 8;
  for (const std::string kind : {"copy", "reverse", "sort"}) {
    BOOST_TEST_CONTEXT(kind) {
      const auto task = task_of(kind, 10, n);
      BOOST_TEST(task->vocab_size() == 12);  // BOS SEP + 10 values
      BOOST_TEST(task->seq_len() == 2 * n + 1);
      BOOST_TEST(task->scored_positions() == range(n + 1, 2 * n));
      Rng rng(1);
      const Batch batch = task->sample(rng, 32);
      check_batch_shape(*task, batch, 32);
      for (int b = 0; b < batch.B; ++b) {
        const Sequence s = full_sequence(batch, b);
        BOOST_TEST(task->token_name(s[0]) == "BOS");
        BOOST_TEST(task->token_name(s[n + 1]) == "SEP");
        std::vector<int> expected = values(*task, s, 1, n + 1);
        if (kind == "reverse") std::reverse(expected.begin(), expected.end());
        if (kind == "sort") std::sort(expected.begin(), expected.end());
        BOOST_TEST(values(*task, s, n + 2, 2 * n + 2) == expected);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(induction_format) {
  const int n = 10;
  const auto task = task_of("induction", 16, n);
  BOOST_TEST(task->vocab_size() == 17);  // BOS + 16 values
  BOOST_TEST(task->seq_len() == 2 * n);
  BOOST_TEST(task->scored_positions() == range(16, 19));  // the block is 5..10 long: its last 4 rows always
  Rng rng(2);
  const Batch batch = task->sample(rng, 64);
  check_batch_shape(*task, batch, 64);
  std::set<int> block_lengths, gaps;
  bool repeated_filler = false;
  for (int b = 0; b < batch.B; ++b) {
    const Sequence s = full_sequence(batch, b);
    BOOST_TEST(task->token_name(s[0]) == "BOS");
    // BOS, p fillers, a block of m distinct values, q fillers, the block again (the last m tokens), with
    // p + q = 2(n - m) and no filler equal to a block value. Find the layout that fits (the longest, should
    // two fit; the generator keeps the fillers just before the two copies different, so one does).
    const std::vector<int> all = values(*task, s, 1, 2 * n + 1);
    int m = 0, q = 0;
    for (int mm = 5; mm <= n; ++mm) {
      for (int qq = 0; qq <= 2 * (n - mm); ++qq) {
        const int p = 2 * (n - mm) - qq;
        const std::vector<int> block(all.begin() + p, all.begin() + p + mm);
        if (!std::equal(block.begin(), block.end(), all.end() - mm)) continue;
        if (std::set<int>(block.begin(), block.end()).size() != block.size()) continue;
        bool disjoint = true;
        for (int i = 0; i < 2 * n; ++i) {
          const bool in_a_copy = (i >= p && i < p + mm) || i >= 2 * n - mm;
          if (!in_a_copy && std::count(block.begin(), block.end(), all[i])) disjoint = false;
        }
        if (disjoint && mm > m) m = mm, q = qq;
      }
    }
    BOOST_REQUIRE((m >= 5 && m <= n));
    block_lengths.insert(m);
    gaps.insert(q);
    const std::vector<int> fillers_before(all.begin(), all.begin() + 2 * (n - m) - q);
    std::vector<int> fillers(fillers_before);
    fillers.insert(fillers.end(), all.end() - m - q, all.end() - m);
    if (std::set<int>(fillers.begin(), fillers.end()).size() < fillers.size()) repeated_filler = true;
    // Scored: the repeat's x1..x(m-1) predict x2..xm; its first token is not (nothing predicts it).
    const int repeat = 2 * n + 1 - m;  // the position of the repeat's x1
    BOOST_TEST(task->scored_positions_of(s) == range(repeat, 2 * n - 1));
    BOOST_TEST(batch.targets[b * batch.T + repeat - 1] == -1);
    // Ideal keys exactly on the scored rows: the key right after the block's copy of the current token,
    // which holds the target.
    const Sequence inputs(s.begin(), s.end() - 1);
    const auto keys = task->ideal_keys(inputs);
    for (int t = 0; t < batch.T; ++t) {
      if (t < repeat) {
        BOOST_TEST(keys[t].empty());
      } else {
        BOOST_REQUIRE(keys[t].size() == 1u);
        BOOST_TEST(keys[t][0] == t - m - q + 1);
        BOOST_TEST(inputs[keys[t][0]] == s[t + 1]);
      }
    }
  }
  // Where the block sits and how far back its copy is both vary, so position alone cannot predict the
  // repeat; fillers repeat (drawn with replacement), so "seen once" does not mark the block.
  BOOST_TEST(block_lengths.size() >= 4u);
  BOOST_TEST(gaps.size() >= 4u);
  BOOST_TEST(repeated_filler);
}

BOOST_AUTO_TEST_CASE(modadd_format) {
  for (int length : {2, 3}) {
    const int p = 23;
    const auto task = task_of("modadd", p, length);
    BOOST_TEST(task->vocab_size() == p + 3);  // BOS + = and p values
    BOOST_TEST(task->seq_len() == 2 * length + 1);
    BOOST_TEST(task->scored_positions() == std::vector<int>{2 * length});
    Rng rng(3);
    const Batch batch = task->sample(rng, 32);
    check_batch_shape(*task, batch, 32);
    for (int b = 0; b < batch.B; ++b) {
      const Sequence s = full_sequence(batch, b);
      BOOST_TEST(task->token_name(s[0]) == "BOS");
      int sum = 0;
      for (int i = 1; i <= length; ++i) {
        sum += std::stoi(task->token_name(s[2 * i - 1]));
        BOOST_TEST(task->token_name(s[2 * i]) == (i < length ? "+" : "="));
      }
      BOOST_TEST(std::stoi(task->token_name(s[2 * length + 1])) == sum % p);
    }
  }
}

BOOST_AUTO_TEST_CASE(counting_format) {
  const int n = 8;
  const auto task = task_of("counting", 10, n);
  BOOST_TEST(task->vocab_size() == 12);
  BOOST_TEST(task->seq_len() == 2 * n + 1);
  BOOST_TEST(task->scored_positions() == range(n + 1, 2 * n));
  Rng rng(4);
  const Batch batch = task->sample(rng, 32);
  check_batch_shape(*task, batch, 32);
  for (int b = 0; b < batch.B; ++b) {
    const Sequence s = full_sequence(batch, b);
    BOOST_TEST(task->token_name(s[n + 1]) == "SEP");
    const std::vector<int> prompt = values(*task, s, 1, n + 1);
    std::vector<int> counts;
    for (int a : prompt) counts.push_back(int(std::count(prompt.begin(), prompt.end(), a)));
    BOOST_TEST(values(*task, s, n + 2, 2 * n + 2) == counts);
  }
}

BOOST_AUTO_TEST_CASE(random_format) {
  const auto task = task_of("random", 16, 32);
  BOOST_TEST(task->vocab_size() == 16);
  BOOST_TEST(task->seq_len() == 32);
  BOOST_TEST(task->scored_positions() == range(0, 31));
  Rng rng(5);
  const Batch batch = task->sample(rng, 8);
  check_batch_shape(*task, batch, 8);
  BOOST_TEST(std::count(batch.targets.begin(), batch.targets.end(), -1) == 0);
  // No special tokens: every id is a value and names itself.
  for (int id = 0; id < 16; ++id) BOOST_TEST(task->token_name(id) == std::to_string(id));
  // Uniform enough to use every token in 8 x 33 draws.
  BOOST_TEST(std::set<int32_t>(batch.inputs.begin(), batch.inputs.end()).size() == 16u);
}

BOOST_AUTO_TEST_CASE(token_names_round_trip) {
  const auto reverse = task_of("reverse", 10, 8);
  // docs/architecture.md's example: --tokens "BOS 3 1 4" is --ids "0 5 3 6".
  BOOST_TEST(reverse->token_name(0) == "BOS");
  BOOST_TEST(reverse->token_name(1) == "SEP");
  BOOST_TEST(reverse->token_name(5) == "3");
  BOOST_TEST(*reverse->token_id("BOS") == 0);
  BOOST_TEST(*reverse->token_id("3") == 5);
  BOOST_TEST(*reverse->token_id("9") == 11);
  for (const char* bad : {"10", "-1", "03", "", "bos", " 3", "x", "99999999999"}) {
    BOOST_TEST(!reverse->token_id(bad).has_value(), bad);
  }
  BOOST_CHECK_THROW(reverse->token_name(12), std::out_of_range);
  BOOST_CHECK_THROW(reverse->token_name(-1), std::out_of_range);

  const auto modadd = task_of("modadd", 23, 2);
  BOOST_TEST(modadd->token_name(1) == "+");
  BOOST_TEST(modadd->token_name(2) == "=");
  BOOST_TEST(*modadd->token_id("=") == 2);
  BOOST_TEST(*modadd->token_id("0") == 3);
}

BOOST_AUTO_TEST_CASE(eval_set_is_its_own_stream_and_held_out) {
  const auto reverse = task_of("reverse", 10, 8);
  // Not the training stream of the same seed.
  Rng training(42);
  BOOST_TEST(reverse->eval_set(42, 64).inputs != reverse->sample(training, 64).inputs);
  const Batch eval = reverse->eval_set(42, 64);
  check_batch_shape(*reverse, eval, 64);

  // Modular addition's space is small enough to see all of it: training and evaluation pairs never meet,
  // and between them they cover every pair.
  const auto modadd = task_of("modadd", 23, 2);
  std::set<Sequence> trained, held_out;
  Rng rng(1);
  for (int i = 0; i < 100; ++i) {
    const Batch batch = modadd->sample(rng, 64);
    for (int b = 0; b < batch.B; ++b) trained.insert(full_sequence(batch, b));
  }
  const Batch eval_pairs = modadd->eval_set(1, 2000);
  for (int b = 0; b < eval_pairs.B; ++b) held_out.insert(full_sequence(eval_pairs, b));
  for (const Sequence& s : held_out) BOOST_TEST(!trained.count(s));
  BOOST_TEST(trained.size() + held_out.size() == size_t(23 * 23));
  // About one pair in five is held out.
  BOOST_TEST(held_out.size() > 23u * 23 / 10);
  BOOST_TEST(held_out.size() < 23u * 23 * 3 / 10);
}

using Keys = std::vector<std::vector<int>>;

BOOST_AUTO_TEST_CASE(prompt_answer_ideal_keys_on_hand_built_sequences) {
  // ids: BOS 0, SEP 1, value k = k + 2.  BOS 1 2 3 SEP, then the answers so far (the inputs drop the last).
  const Sequence prompt_123 = {0, 3, 4, 5, 1, 5, 4};
  BOOST_TEST(task_of("copy", 10, 3)->ideal_keys(prompt_123) == (Keys{{}, {}, {}, {}, {1}, {2}, {3}}));
  BOOST_TEST(task_of("reverse", 10, 3)->ideal_keys(prompt_123) == (Keys{{}, {}, {}, {}, {3}, {2}, {1}}));
  // sort of 3 1 3 is 1 3 3: the row for "1" looks at position 2, the rows for "3" at positions 1 and 3.
  const Sequence prompt_313 = {0, 5, 3, 5, 1, 3, 5};
  BOOST_TEST(task_of("sort", 10, 3)->ideal_keys(prompt_313) == (Keys{{}, {}, {}, {}, {2}, {1, 3}, {1, 3}}));
  // counting of 1 2 1 3: rows 5..8 predict the counts of a1..a4 and look at the positions holding each.
  const Sequence counting = {0, 3, 4, 3, 5, 1, 4, 3, 4};
  BOOST_TEST(task_of("counting", 10, 4)->ideal_keys(counting) ==
             (Keys{{}, {}, {}, {}, {}, {1, 3}, {2}, {1, 3}, {4}}));
  // A sequence of the wrong length is an error, not a wrong answer.
  BOOST_CHECK_THROW(task_of("copy", 10, 3)->ideal_keys({0, 3, 4}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(induction_ideal_keys_on_hand_built_sequences) {
  // induction (BOS 0, value k = k + 1), n = 3, so T = 6 and the block is 2 or 3 long.
  // BOS 9 | 5 7 | 4 | 5 7: the repeat's 5 (row 5) looks right after its copy at 2, at the 7 in 3. The gap's
  // 4 (row 4) is a filler: not scored.
  BOOST_TEST(task_of("induction", 10, 3)->ideal_keys({0, 10, 6, 8, 5, 6}) == (Keys{{}, {}, {}, {}, {}, {3}}));
  // BOS 5 7 2 | 5 7, a block of 3 without fillers: rows 4 and 5 look at 2 and 3.
  BOOST_TEST(task_of("induction", 10, 3)->ideal_keys({0, 6, 8, 3, 6, 8}) == (Keys{{}, {}, {}, {}, {2}, {3}}));
  // n = 4, T = 8: BOS 9 9 | 5 7 | 3 3 | 5 7. Rows 2 and 6 hold a repeated filler, which predicts nothing:
  // not scored; row 7 (the repeat's 5) looks at 4. Scored positions agree with the keys.
  const auto induction = task_of("induction", 10, 4);
  BOOST_TEST(induction->ideal_keys({0, 10, 10, 6, 8, 4, 4, 6}) == (Keys{{}, {}, {}, {}, {}, {}, {}, {4}}));
  BOOST_TEST(induction->scored_positions_of({0, 10, 10, 6, 8, 4, 4, 6, 8}) == std::vector<int>{7});
}

BOOST_AUTO_TEST_CASE(modadd_and_random_ideal_keys_on_hand_built_sequences) {
  // modadd (BOS 0, "+" 1, "=" 2, value k = k + 3): BOS 3 + 4 = ; the "=" row looks at both operands.
  const Sequence modadd = {0, 6, 1, 7, 2};
  BOOST_TEST(task_of("modadd", 10, 2)->ideal_keys(modadd) == (Keys{{}, {}, {}, {}, {1, 3}}));
  BOOST_TEST(task_of("random", 4, 5)->ideal_keys({0, 1, 2, 3, 0}) == Keys(5));
}

BOOST_AUTO_TEST_CASE(ideal_keys_of_sampled_sequences_point_at_the_answer) {
  // For copy, reverse and induction the key holds exactly the token the row must predict.
  for (const std::string kind : {"copy", "reverse", "induction"}) {
    const auto task = task_of(kind, 16, 6);
    Rng rng(9);
    const Batch batch = task->sample(rng, 16);
    for (int b = 0; b < batch.B; ++b) {
      const Sequence inputs(batch.inputs.begin() + b * batch.T, batch.inputs.begin() + (b + 1) * batch.T);
      const auto keys = task->ideal_keys(inputs);
      for (int t : task->scored_positions()) {
        BOOST_REQUIRE(keys[t].size() == 1u);
        BOOST_TEST(keys[t][0] <= t);  // causal
        BOOST_TEST(inputs[keys[t][0]] == batch.targets[b * batch.T + t]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(exact_match_accuracy) {
  const auto task = task_of("reverse", 10, 8);
  Rng rng(11);
  const Batch batch = task->sample(rng, 10);
  // The targets where scored, anything elsewhere: all right.
  std::vector<int32_t> predictions(batch.targets.size());
  for (size_t i = 0; i < predictions.size(); ++i)
    predictions[i] = batch.targets[i] >= 0 ? batch.targets[i] : 0;
  BOOST_TEST(train::exact_match_accuracy(predictions, batch) == 1.0);
  // A wrong prediction where nothing is scored changes nothing.
  predictions[0] = 7;
  BOOST_TEST(train::exact_match_accuracy(predictions, batch) == 1.0);
  // One wrong answer token fails its whole sequence; two in one sequence still fail one.
  const int last = batch.T - 1;
  predictions[last] = (batch.targets[last] + 1) % task->vocab_size();
  BOOST_TEST(train::exact_match_accuracy(predictions, batch) == 0.9);
  predictions[last - 1] = (batch.targets[last - 1] + 1) % task->vocab_size();
  BOOST_TEST(train::exact_match_accuracy(predictions, batch) == 0.9);
  predictions[3 * batch.T + last] = (batch.targets[3 * batch.T + last] + 1) % task->vocab_size();
  BOOST_TEST(train::exact_match_accuracy(predictions, batch) == 0.8);
  BOOST_CHECK_THROW(train::exact_match_accuracy({1, 2}, batch), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(bad_task_configs_are_refused) {
  BOOST_CHECK_THROW(task_of("nope", 10, 8), std::invalid_argument);
  BOOST_CHECK_THROW(task_of("induction", 5, 8), std::invalid_argument);
  BOOST_CHECK_THROW(task_of("modadd", 10, 1), std::invalid_argument);
  const auto problem = train::find_task_problem(TaskConfig{"copy", 10, 0});
  BOOST_REQUIRE(problem.has_value());
  BOOST_TEST(problem->field == "length");
  BOOST_TEST(problem->message == "copy needs length >= 1, got 0");
  BOOST_TEST(!train::find_task_problem(TaskConfig{}).has_value());
  // Each kind's own rule.
  const auto induction = train::find_task_problem(TaskConfig{"induction", 5, 8});
  BOOST_REQUIRE(induction.has_value());
  BOOST_TEST(induction->field == "vocab");
  BOOST_TEST(
      induction->message ==
      "induction draws up to 12 distinct values (fillers and the repeated block) for length 8, so vocab "
      "must be at least that, got 5");
  BOOST_TEST(!train::find_task_problem(TaskConfig{"induction", 12, 8}).has_value());
  const auto counting = train::find_task_problem(TaskConfig{"counting", 8, 8});
  BOOST_REQUIRE(counting.has_value());
  BOOST_TEST(counting->message ==
             "counting writes counts up to length 8 as value tokens, so vocab must be > 8, got 8");
  BOOST_TEST(!train::find_task_problem(TaskConfig{"counting", 9, 8}).has_value());
  // Too few distinct sequences to hold some out: 2^5 = 32 and 7^2 = 49 are below 50, 2^6 = 64 is not.
  const auto small = train::find_task_problem(TaskConfig{"copy", 2, 5});
  BOOST_REQUIRE(small.has_value());
  BOOST_TEST(small->field == "length");
  BOOST_TEST(
      small->message ==
      "copy with vocab 2 and length 5 has fewer than 50 distinct sequences, too few to hold some out for "
      "evaluation");
  BOOST_TEST(train::find_task_problem(TaskConfig{"modadd", 7, 2}).has_value());
  BOOST_TEST(!train::find_task_problem(TaskConfig{"copy", 2, 6}).has_value());
  BOOST_TEST(train::log10_distinct_sequences(TaskConfig{"copy", 10, 3}) == 3.0,
             boost::test_tools::tolerance(1e-12));
  // random draws n+1 tokens; induction n distinct values in order, 10*9*8 = 720.
  BOOST_TEST(train::log10_distinct_sequences(TaskConfig{"random", 10, 3}) == 4.0,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(train::log10_distinct_sequences(TaskConfig{"induction", 10, 3}) == std::log10(720.0),
             boost::test_tools::tolerance(1e-12));
}
