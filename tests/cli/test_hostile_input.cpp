// The command line under inputs a careless or hostile user gives: each case exits 2 with one printable
// line on stderr and writes nothing, where it used to hang, allocate gigabytes, or print raw bytes.
// Raw bytes reach the program through printf in the shell (/bin/sh has no $'...').
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "io/printable.h"
#include "train/config.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using testing::run_attograd;

namespace {

const std::string kSmall =
    " --set model.d_model=16 --set model.n_heads=2 --set model.n_layers=1 --set model.d_ff=32"
    " --set train.batch_size=8 --set train.eval_size=16 --set output.attention_every=0";

bool one_printable_line(const std::string& err) {
  return err.size() > 1 && err.back() == '\n' && err.find('\n') == err.size() - 1 &&
         io::is_printable_utf8(err.substr(0, err.size() - 1));
}

// Exit 2, one printable line holding `expected`, no run folder.
void expect_refused(const std::string& args, const std::string& expected) {
  testing::TempDir dir;
  const auto r = run_attograd(args + " --out '" + dir.file("run") + "'");
  BOOST_TEST(r.exit_code == 2, args << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(one_printable_line(r.err), args << " -> " << r.err);
  BOOST_TEST(r.err.find(expected) != std::string::npos, args << " -> " << r.err);
  BOOST_TEST(!fs::exists(dir.file("run")), args << " wrote a run folder");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string train_small(const testing::TempDir& dir, const std::string& extra = "") {
  const std::string run = dir.file("run");
  const auto r = run_attograd("train configs/reverse.json --set train.steps=3" + kSmall + extra + " --out '" +
                              run + "'");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return run;
}

}  // namespace

BOOST_AUTO_TEST_CASE(too_many_threads_are_refused_before_starting_them) {
  expect_refused("train configs/reverse.json --set train.threads=600",
                 "--set train.threads=600: /train/threads: must be <= ");
}

BOOST_AUTO_TEST_CASE(sizes_beyond_memory_are_refused_naming_the_field) {
  const auto start = std::chrono::steady_clock::now();
  expect_refused("train configs/reverse.json --set model.d_model=40000",
                 "/model/d_model: 40000 makes the run need about");
  expect_refused("train configs/reverse.json --set model.vocab=1000000000", "/model/vocab: 1000000000 makes");
  expect_refused("train configs/reverse.json --set model.n_layers=100000000",
                 "/model/n_layers: 100000000 makes");
  expect_refused("train configs/reverse.json --set train.eval_size=2000000000",
                 "/train/eval_size: 2000000000 makes");
  // Refused from the estimate, not after minutes of allocating.
  BOOST_TEST(seconds_since(start) < 20);
}

BOOST_AUTO_TEST_CASE(config_errors_are_one_printable_line) {
  testing::TempDir dir;
  std::ofstream(dir.file("lr.json")) << R"({"train": {"lr": 1e400}})";
  expect_refused("train '" + dir.file("lr.json") + "'",
                 "lr.json: line 1, column 18: number 1e400 is out of range");
  expect_refused("train configs/reverse.json --set \"$(printf 'name=bad\\377')\"",
                 "/name: expected UTF-8 text");
  expect_refused("train configs/reverse.json --set \"$(printf 'output.dir=runs/\\303')\"",
                 "/output/dir: expected UTF-8 text");
  expect_refused("train configs/reverse.json --set \"$(printf 'train.steps\\015\\012=5')\"",
                 "/train/steps\\x0d\\x0a: unknown key");
  std::ofstream(dir.file("key.json")) << R"({"train": {"st\neps": 1}})";
  expect_refused("train '" + dir.file("key.json") + "'", "/train/st\\x0aeps: unknown key");
  // A device is refused by kind, before a byte is read; a regular file by its size.
  expect_refused("train /dev/zero", "/dev/zero: is a character device, not a regular file");
  std::ofstream{dir.file("huge.json")}.close();
  std::filesystem::resize_file(dir.file("huge.json"), 2 << 20);
  expect_refused("train '" + dir.file("huge.json") + "'", "huge.json: larger than 1 MiB, not a config file");
  const auto sweep = run_attograd("sweep '" + dir.file("huge.json") + "'");  // the sweep file's reader too
  BOOST_TEST(sweep.exit_code == 2, sweep.err);
  BOOST_TEST(one_printable_line(sweep.err), sweep.err);
  BOOST_TEST(sweep.err.find("huge.json: larger than 1 MiB, not a sweep file") != std::string::npos,
             sweep.err);
}

BOOST_AUTO_TEST_CASE(resume_refuses_overrides_that_change_the_run) {
  testing::TempDir dir;
  const std::string run = train_small(dir);
  for (const std::string set : {"task.kind=copy", "seed=7", "train.lr=0.1", "train.batch_size=4",
                                "output.dir=elsewhere", "task.vocab=5"}) {
    const auto r = run_attograd("train --resume '" + run + "' --set " + set);
    BOOST_TEST(r.exit_code == 2, set << ": " << r.err);
    BOOST_TEST(one_printable_line(r.err), r.err);
    BOOST_TEST(r.err.find("--set " + set + ": /") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("cannot change when resuming") != std::string::npos, r.err);
  }
  BOOST_TEST(nlohmann::json::parse(testing::read_all(run + "/config.json"))["task"]["kind"] == "reverse");
  const auto ok = run_attograd("train --resume '" + run + "' --set train.steps=4 --set train.threads=1");
  BOOST_TEST(ok.exit_code == 0, ok.err);
}

BOOST_AUTO_TEST_CASE(token_input_is_strict_and_escaped) {
  testing::TempDir dir;
  const std::string run = train_small(dir);
  for (const std::string ids : {"0 +3", "0 -0", "0 05"}) {
    const auto r = run_attograd("forward '" + run + "' --ids '" + ids + "'");
    BOOST_TEST(r.exit_code == 2, ids << ": " << r.out);
    BOOST_TEST(r.err.find("is not a token id in 0..11") != std::string::npos, r.err);
  }
  const auto esc = run_attograd("forward '" + run + "' --tokens \"$(printf 'BOS \\033[2J')\"");
  BOOST_TEST(esc.exit_code == 2);
  BOOST_TEST(one_printable_line(esc.err), esc.err);
  BOOST_TEST(esc.err.find("'\\x1b[2J'") != std::string::npos, esc.err);
}

BOOST_AUTO_TEST_CASE(forward_names_predictions_beyond_the_tasks_vocabulary) {
  testing::TempDir dir;
  // 200 ids of which the task uses 12: an untrained model predicts mostly ids the task has no name for.
  const std::string run = train_small(dir, " --set model.vocab=200 --set train.steps=1");
  const auto r = run_attograd("forward '" + run + "' --tokens 'BOS 3 1 4 SEP'");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("->  <id ") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(eval_refuses_a_checkpoint_whose_config_claims_a_huge_model) {
  testing::TempDir dir;
  const std::string run = train_small(dir);
  const std::string path = run + "/checkpoint/model.safetensors";
  train::SafetensorsFile f = train::read_safetensors(path);
  nlohmann::json config = nlohmann::json::parse(f.metadata["config"]);
  config["model"]["d_model"] = 40000;
  config["model"]["n_heads"] = 1;
  config["train"]["memory_limit_gb"] = 1e6;  // past the estimate: the tensor table must still refuse it
  f.metadata["config"] = config.dump();
  train::write_safetensors(path, f.tensors, f.metadata);
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_attograd("eval '" + run + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(one_printable_line(r.err), r.err);
  BOOST_TEST(r.err.find("(tensor table)") != std::string::npos, r.err);
  BOOST_TEST(seconds_since(start) < 10);
}
