// Every JSON input of the command line goes through the one bounded reader (io/json_read.h): a value nested
// 200,000 levels deep anywhere (under an unknown key, in a sequences line, a sweep's grid or base, an SAE
// config, a detect pattern, a --set value) and a NUL byte are each refused in one line with exit 2, where
// a recursive dump or copy of the value used to overflow the stack (SIGSEGV).
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "io/printable.h"

using testing::run_attograd;

namespace {

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// A trained run for the commands that read one before their input file (detect reads its pattern after
// opening the run): the committed fixture run, copied.
std::string fixture_run(const testing::TempDir& dir) {
  const std::string run = dir.file("run");
  if (!std::filesystem::exists(run))
    std::filesystem::copy(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small", run,
                          std::filesystem::copy_options::recursive);
  return run;
}

bool one_printable_line(const std::string& err) {
  return err.size() > 1 && err.back() == '\n' && err.find('\n') == err.size() - 1 &&
         io::is_printable_utf8(err.substr(0, err.size() - 1));
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Exit 2 and one printable line holding `expected`.
void expect_refused(const std::string& args, const std::string& expected) {
  const auto r = run_attograd(args);
  BOOST_TEST(r.exit_code == 2, args.substr(0, 200) << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(one_printable_line(r.err), args.substr(0, 200) << " -> " << r.err);
  BOOST_TEST(r.err.find(expected) != std::string::npos, args.substr(0, 200) << " -> " << r.err);
}

const std::string kDeep = "nested deeper than 64 levels";

}  // namespace

BOOST_AUTO_TEST_CASE(a_config_nested_deep_anywhere) {
  testing::TempDir dir;
  write(dir.file("c.json"), "{\"name\": \"x\", \"unknown\": " + nested(200000) + "}");
  expect_refused("train '" + dir.file("c.json") + "' --out '" + dir.file("run") + "'",
                 "c.json: line 1, column 89: " + kDeep);
  write(dir.file("t.json"), "{\"train\": {\"betas\": " + nested(200000) + "}}");
  expect_refused("train '" + dir.file("t.json") + "'", "t.json: line 1, column 83: " + kDeep);
  // A --set value is read by the same reader (an argument holds at most 128 KiB).
  expect_refused("train configs/reverse.json --set 'train.betas=" + nested(30000) + "'",
                 "--set train.betas=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
  expect_refused("train configs/reverse.json --set 'train.betas=" + nested(30000) + "'",
                 ": line 1, column 65: " + kDeep);
}

BOOST_AUTO_TEST_CASE(a_nul_byte_ends_nothing) {
  testing::TempDir dir;
  write(dir.file("c.json"), std::string("{\"name\": \"x\"}\0 garbage {{{", 27));
  expect_refused("train '" + dir.file("c.json") + "' --out '" + dir.file("run") + "'",
                 "c.json: line 1, column 14: a NUL byte, not JSON text");
  write(dir.file("s.json"), std::string("{\"k\": 8}\0{{", 11));
  expect_refused("sae synthetic --config '" + dir.file("s.json") + "'",
                 "s.json: line 1, column 9: a NUL byte, not JSON text");
  write(dir.file("p.json"), std::string("{\"offset\": 1}\0", 14));
  expect_refused("detect '" + fixture_run(dir) + "' --pattern '" + dir.file("p.json") + "'",
                 "p.json: line 1, column 14: a NUL byte, not JSON text");
  // A sweep file, gradcheck's config, and a line of a sequences file (which used to say only "not a JSON
  // value"): the same refusal, at the NUL.
  write(dir.file("w.json"),
        std::string("{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1]}}\0 {{{", 60));
  expect_refused("sweep '" + dir.file("w.json") + "' --print-commands",
                 "w.json: line 1, column 56: a NUL byte, not JSON text");
  expect_refused("gradcheck '" + dir.file("c.json") + "'",
                 "c.json: line 1, column 14: a NUL byte, not JSON text");
  write(dir.file("d.jsonl"),
        std::string("{\"tokens\": [\"a\", \"b\"]}\n{\"tokens\": [\"a\", \"c\"]}\0 {{{\n", 51));
  expect_refused("train configs/reverse.json --set task.kind=sequences --set 'task.path=" +
                     dir.file("d.jsonl") + "' --out '" + dir.file("run") + "'",
                 "d.jsonl:2: line 1, column 23: a NUL byte, not JSON text");
  write(dir.file("e.jsonl"), std::string("{\"tokens\": [\"a\", \"b\"]}\n\0\n", 25));
  expect_refused("train configs/reverse.json --set task.kind=sequences --set 'task.path=" +
                     dir.file("e.jsonl") + "' --out '" + dir.file("run") + "'",
                 "e.jsonl:2: line 1, column 1: a NUL byte, not JSON text");
}

BOOST_AUTO_TEST_CASE(a_sequences_line_nested_deep) {
  testing::TempDir dir;
  const std::string good = "{\"tokens\": [\"a\", \"b\", \"c\"]}\n";
  for (const std::string& line : {"{\"tokens\": [\"a\", \"b\"], \"scored\": [" + nested(200000) + "]}",
                                  "{\"tokens\": [\"a\", " + nested(200000) + "]}",
                                  "{\"tokens\": [\"a\", \"b\"], \"split\": " + nested(200000) + "}"}) {
    write(dir.file("d.jsonl"), good + line + "\n");
    expect_refused("train configs/reverse.json --set task.kind=sequences --set 'task.path=" +
                       dir.file("d.jsonl") + "' --out '" + dir.file("run") + "'",
                   "d.jsonl:2: line 1, column ");
    expect_refused("train configs/reverse.json --set task.kind=sequences --set 'task.path=" +
                       dir.file("d.jsonl") + "' --out '" + dir.file("run") + "'",
                   kDeep);
  }
  // Duplicate keys in a line are refused too (nlohmann would keep the last one).
  write(dir.file("d.jsonl"), good + "{\"tokens\": [\"a\", \"b\"], \"tokens\": [\"c\", \"d\"]}\n");
  expect_refused("train configs/reverse.json --set task.kind=sequences --set 'task.path=" +
                     dir.file("d.jsonl") + "' --out '" + dir.file("run") + "'",
                 "d.jsonl:2: /tokens: duplicate key");
}

BOOST_AUTO_TEST_CASE(a_sweep_file_nested_deep) {
  testing::TempDir dir;
  write(dir.file("grid.json"),
        "{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1, " + nested(200000) + "]}}");
  expect_refused("sweep '" + dir.file("grid.json") + "'", "grid.json: line 1, column 116: " + kDeep);
  write(dir.file("base.json"), "{\"base\": " + nested(200000) + ", \"grid\": {\"seed\": [1]}}");
  expect_refused("sweep '" + dir.file("base.json") + "'", "base.json: line 1, column 73: " + kDeep);
  // A base config nested deep is the config reader's refusal, named under /base.
  write(dir.file("deep_base.json"), "{\"x\": " + nested(200000) + "}");
  write(dir.file("sweep.json"),
        "{\"base\": \"" + dir.file("deep_base.json") + "\", \"grid\": {\"seed\": [1]}}");
  expect_refused("sweep '" + dir.file("sweep.json") + "'", "sweep.json: /base: ");
  expect_refused("sweep '" + dir.file("sweep.json") + "'", "deep_base.json: line 1, column 70: " + kDeep);
}

BOOST_AUTO_TEST_CASE(an_sae_config_nested_deep) {
  testing::TempDir dir;
  write(dir.file("s.json"), "{\"activation\": " + nested(200000) + "}");
  expect_refused("sae synthetic --config '" + dir.file("s.json") + "'",
                 "s.json: line 1, column 79: " + kDeep);
  // A shallow array where a name belongs: the table's message.
  write(dir.file("a.json"), "{\"activation\": [[\"relu\"]]}");
  expect_refused("sae synthetic --config '" + dir.file("a.json") + "'",
                 "a.json: /activation: expected a string, got an array");
}

BOOST_AUTO_TEST_CASE(a_detect_pattern_nested_deep) {
  testing::TempDir dir;
  write(dir.file("p.json"), "{\"pattern\": " + nested(200000) + "}");
  expect_refused("detect '" + fixture_run(dir) + "' --pattern '" + dir.file("p.json") + "'",
                 "p.json: line 1, column 76: " + kDeep);
  write(dir.file("q.json"), "{\"pattern\": [[1, [2]]]}");
  expect_refused("detect '" + fixture_run(dir) + "' --pattern '" + dir.file("q.json") + "'",
                 "q.json: /pattern/0/1: expected a finite number, got an array");
  write(dir.file("r.json"), "{\"offset\": 1, \"rule\": \"first\"}");
  expect_refused("detect '" + fixture_run(dir) + "' --pattern '" + dir.file("r.json") + "'",
                 "r.json: /: expected exactly one key of \"pattern\", \"offset\" or \"rule\"");
}
