// `attograd train` and friends as a user meets them: bad configs and arguments give one line and exit 2
// with nothing written; Ctrl-C (SIGINT) writes a checkpoint and a resumed run ends with the same model
// bytes as an uninterrupted one; eval and forward read the run folder.
#include <signal.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using testing::run_attograd;

namespace {

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

const std::string kSmall =
    " --set model.d_model=16 --set model.n_heads=2 --set model.n_layers=2 --set model.d_ff=32 --set "
    "train.batch_size=8"
    " --set train.eval_size=32 --set output.attention_every=0";

// `attograd train` of a small reverse model for `steps` steps into the folder `run`.
testing::CommandResult train_small(const std::string& run, int steps) {
  return run_attograd("train configs/reverse.json --set train.steps=" + std::to_string(steps) + kSmall +
                      " --out " + testing::shell_quote(run));
}

// Each bad input: exit 2, exactly one line on stderr containing `expected`, and no run folder.
void expect_bad(const std::string& args, const std::string& expected) {
  testing::TempDir dir;
  const auto r = run_attograd(args + " --out '" + dir.file("run") + "'");
  BOOST_TEST(r.exit_code == 2, args << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(count_lines(r.err) == 1, args << " -> " << r.err);
  BOOST_TEST(r.err.find(expected) != std::string::npos, args << " -> " << r.err);
  BOOST_TEST(!fs::exists(dir.file("run")), args << " wrote a run folder");
}

}  // namespace

BOOST_AUTO_TEST_CASE(bad_configs_give_one_line_and_exit_2) {
  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  expect_bad("train " + write("heads.json", R"({"model": {"n_heads": 3}})"),
             "/model/n_heads: 3 does not divide d_model 64");
  expect_bad("train " + write("lr.json", R"({"train": {"lr": 0}})"), "/train/lr");
  expect_bad("train " + write("steps.json", R"({"train": {"steps": 0}})"), "/train/steps");
  expect_bad("train " + write("threads.json", R"({"train": {"threads": 0}})"), "/train/threads");
  expect_bad("train " + write("unknown.json", R"({"model": {"d_modle": 8}})"), "/model/d_modle");
  expect_bad("train " + write("type.json", R"({"train": {"steps": "many"}})"), "/train/steps");
  expect_bad("train " + write("maxlen.json", R"({"model": {"max_len": 4}})"), "/model/max_len");
  expect_bad("train " + write("vocab.json", R"({"model": {"vocab": 3}})"), "/model/vocab");
  expect_bad("train " + write("syntax.json", "{\n  \"seed\": 1,\n  oops\n}"), "line 3");
  expect_bad("train " + dir.file("missing.json"), "missing.json");
  expect_bad("train configs/reverse.json --set train.stepz=5", "/train/stepz");
  expect_bad("train configs/reverse.json --set model.n_heads=5", "/model/n_heads");
  expect_bad("train configs/reverse.json --bogus", "--bogus");
}

BOOST_AUTO_TEST_CASE(a_run_folder_with_a_checkpoint_is_not_overwritten_silently) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  BOOST_REQUIRE(train_small(run, 3).exit_code == 0);
  const auto again = train_small(run, 3);
  BOOST_TEST(again.exit_code == 2);
  BOOST_TEST(again.err.find("--resume") != std::string::npos, again.err);
}

BOOST_AUTO_TEST_CASE(eval_and_forward_read_the_run_folder) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  BOOST_REQUIRE(train_small(run, 5).exit_code == 0);
  const auto e = run_attograd("eval '" + run + "' --json");
  BOOST_TEST(e.exit_code == 0, e.err);
  const auto ej = nlohmann::json::parse(e.out);
  BOOST_TEST(ej.at("n").get<int>() == 32);
  BOOST_TEST(ej.at("eval_acc").get<double>() >= 0.0);

  const auto f = run_attograd("forward '" + run + "' --tokens \"BOS 3 1 4\" --json");
  BOOST_TEST(f.exit_code == 0, f.err);
  const auto fj = nlohmann::json::parse(f.out);
  BOOST_TEST(fj.at("ids") == nlohmann::json({0, 5, 3, 6}));
  BOOST_TEST(fj.at("logits").size() == 4u);
  BOOST_TEST(fj.at("logits")[0].size() == 12u);  // vocab 10 + BOS + SEP
  BOOST_TEST(fj.at("attention").size() == 4u);   // 2 layers x 2 heads
  const auto ids = run_attograd("forward '" + run + "' --ids \"0 5 3 6\" --json");
  BOOST_TEST(nlohmann::json::parse(ids.out).at("predictions") == fj.at("predictions"));

  const auto bad = run_attograd("forward '" + run + "' --tokens \"BOS 3 x\"");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("'x'") != std::string::npos, bad.err);
  const auto missing = run_attograd("eval '" + dir.file("nope") + "'");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(count_lines(missing.err) == 1);
}

BOOST_AUTO_TEST_CASE(ctrl_c_checkpoints_and_resume_is_bit_exact) {
  testing::TempDir dir;
  const std::string args =
      "train configs/reverse.json --set train.steps=3000 --set train.log_every=10"
      " --set train.eval_every=1000 --set output.checkpoint_every=0 --set train.threads=1" +
      kSmall;
  BOOST_REQUIRE(run_attograd(args + " --out '" + dir.file("full") + "'").exit_code == 0);

  // Start a second run, wait for its first log lines, then press Ctrl-C.
  const std::string run = dir.file("interrupted");
  const pid_t pid = fork();
  if (pid == 0) {
    std::string cmd = std::string("cd '") + ATTOGRAD_SOURCE_DIR + "' && exec '" + ATTOGRAD_BINARY + "' " +
                      args + " --out '" + run + "' >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         count_lines(testing::read_all(run + "/metrics.jsonl")) < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 130, "the run finished before Ctrl-C arrived, or crashed");
  BOOST_TEST(fs::exists(run + "/checkpoint/model.safetensors"));

  const auto resumed = run_attograd("train --resume '" + run + "'");
  BOOST_TEST(resumed.exit_code == 0, resumed.err);
  // The two runs differ only in output.dir (inside the header's config), so compare every tensor's bytes.
  const train::SafetensorsFile a = train::read_safetensors(run + "/checkpoint/model.safetensors");
  const train::SafetensorsFile b = train::read_safetensors(dir.file("full/checkpoint/model.safetensors"));
  BOOST_REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    BOOST_TEST(a.tensors[i].name == b.tensors[i].name);
    BOOST_TEST(
        std::memcmp(a.tensors[i].data.data(), b.tensors[i].data.data(), a.tensors[i].data.size() * 4) == 0,
        a.tensors[i].name << " differs after Ctrl-C and resume");
  }
  BOOST_TEST(a.metadata.at("step") == b.metadata.at("step"));
}

BOOST_AUTO_TEST_CASE(resume_can_train_longer_and_checks_its_overrides) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  BOOST_REQUIRE(train_small(run, 5).exit_code == 0);
  const auto longer = run_attograd("train --resume '" + run + "' --set train.steps=8");
  BOOST_TEST(longer.exit_code == 0, longer.err);
  const std::string metrics = testing::read_all(run + "/metrics.jsonl");
  BOOST_TEST(metrics.find("\"step\":8") != std::string::npos, metrics);
  const auto bad = run_attograd("train --resume '" + run + "' --set train.stepz=9");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("--set train.stepz=9: /train/stepz") != std::string::npos, bad.err);
  const auto other = run_attograd("train configs/copy.json --resume '" + run + "'");
  BOOST_TEST(other.exit_code == 2);
  BOOST_TEST(other.err.find("differs from the config") != std::string::npos, other.err);
}
