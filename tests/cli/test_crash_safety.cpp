// Run folders survive real faults: SIGKILL at random moments of a run that checkpoints every step (eval
// then works or gives one line, and --resume ends with the same tensors as an uninterrupted run), a full
// disk (simulated with a file-size limit) while checkpointing (exit 1, one line naming the file, the
// previous checkpoint intact), SIGTERM (checkpoint and exit 130, like Ctrl-C), and --overwrite followed by
// a crash (the old checkpoint is gone, so --resume cannot continue the old run by mistake).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using testing::run_attograd;

namespace {

const std::string kTiny =
    "train configs/reverse.json --set train.steps=1500 --set train.log_every=1 --set train.eval_every=30"
    " --set output.checkpoint_every=1 --set train.threads=1 --set model.d_model=16 --set model.n_heads=2"
    " --set model.n_layers=1 --set model.d_ff=32 --set train.batch_size=8 --set train.eval_size=16"
    " --set output.attention_every=20";

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Starts `attograd ARGS` in the background (output discarded); the caller signals and reaps it.
pid_t spawn_attograd(const std::string& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("cd '") + ATTOGRAD_SOURCE_DIR + "' && exec '" + ATTOGRAD_BINARY +
                            "' " + args + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Every tensor's bytes and the step of two model checkpoints are equal.
void expect_same_model(const std::string& a_path, const std::string& b_path) {
  const train::SafetensorsFile a = train::read_safetensors(a_path), b = train::read_safetensors(b_path);
  BOOST_REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    BOOST_TEST(a.tensors[i].name == b.tensors[i].name);
    BOOST_TEST(
        std::memcmp(a.tensors[i].data.data(), b.tensors[i].data.data(), a.tensors[i].data.size() * 4) == 0,
        a.tensors[i].name << " differs");
  }
  BOOST_TEST(a.metadata.at("step") == b.metadata.at("step"));
}

bool no_temp_files(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sigkill_at_random_moments_never_loses_the_last_checkpoint) {
  testing::TempDir dir;
  const std::string full = dir.file("full"), run = dir.file("killed");
  BOOST_REQUIRE(run_attograd(kTiny + " --out '" + full + "'").exit_code == 0);

  // 24 attempts are killed at a random moment of their training (unless they finish first), then one runs
  // to the end: 1500 steps checkpointing every step outlast the attempts on a fast machine, so the kills
  // land whatever the machine's speed, and the slowest machine only takes longer in the last attempt.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_ms(0, 60);
  const int kill_attempts = 24;
  int kills = 0, resumed_from_checkpoint = 0;
  bool finished = false;
  for (int attempt = 0; attempt <= kill_attempts && !finished; ++attempt) {
    const bool has_checkpoint = fs::exists(run + "/checkpoint/model.safetensors");
    const std::string args =
        has_checkpoint ? "train --resume '" + run + "'" : kTiny + " --out '" + run + "' --overwrite";
    resumed_from_checkpoint += has_checkpoint;
    const pid_t pid = spawn_attograd(args);
    int status = 0;
    bool exited = false;
    if (attempt < kill_attempts) {
      // The kill lands a random 0-60 ms after the run has logged a new step, so it hits the training loop
      // (steps, checkpoint writes, dumps) however slowly the process starts (e.g. under a sanitizer).
      const size_t logged = count_lines(testing::read_all(run + "/metrics.jsonl"));
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!exited && std::chrono::steady_clock::now() < give_up &&
             count_lines(testing::read_all(run + "/metrics.jsonl")) <= logged) {
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms(rng));
      while (!exited && std::chrono::steady_clock::now() < deadline) {
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!exited) {
        kill(pid, SIGKILL);
        status = wait_status(pid);
        ++kills;
      }
    } else {
      status = wait_status(pid);
    }
    if (WIFEXITED(status)) {
      BOOST_REQUIRE_MESSAGE(WEXITSTATUS(status) == 0,
                            "attograd " << args << " failed: " << WEXITSTATUS(status));
      finished = true;
    }
    // Whatever moment the kill hit, eval either works or says in one line why not.
    if (fs::exists(run)) {
      const auto eval = run_attograd("eval '" + run + "'");
      BOOST_TEST((eval.exit_code == 0 || (eval.exit_code == 2 && count_lines(eval.err) == 1)), eval.err);
      if (fs::exists(run + "/checkpoint/model.safetensors")) BOOST_TEST(eval.exit_code == 0, eval.err);
    }
  }
  BOOST_TEST_REQUIRE(finished);
  BOOST_TEST(kills >= 16,
             "only " << kills << " of " << kill_attempts << " kills landed before the run ended");
  BOOST_TEST(resumed_from_checkpoint >= kill_attempts / 2);
  expect_same_model(run + "/checkpoint/model.safetensors", full + "/checkpoint/model.safetensors");
  BOOST_TEST(no_temp_files(run));
}

BOOST_AUTO_TEST_CASE(a_full_disk_while_checkpointing_is_exit_1_and_keeps_the_old_checkpoint) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  BOOST_REQUIRE(run_attograd(kTiny + " --set train.steps=20 --out '" + run + "'").exit_code == 0);
  const std::string before = testing::read_all(run + "/checkpoint/model.safetensors");
  // A 4 KB file-size limit with SIGXFSZ ignored: writes past it fail with EFBIG, as on a full disk.
  const std::string cmd = std::string("cd '") + ATTOGRAD_SOURCE_DIR +
                          "' && ulimit -f 4 && trap '' XFSZ && '" + ATTOGRAD_BINARY + "' train --resume '" +
                          run + "' --set train.steps=40 >/dev/null 2>'" + dir.file("err") + "'";
  const int status = std::system(cmd.c_str());
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 1);
  const std::string err = testing::read_all(dir.file("err"));
  BOOST_TEST(count_lines(err) == 1, err);
  BOOST_TEST(err.find("cannot write") != std::string::npos, err);
  BOOST_TEST(err.find(run) != std::string::npos, err);
  BOOST_TEST(testing::read_all(run + "/checkpoint/model.safetensors") == before);
  BOOST_TEST(no_temp_files(run));
  const auto eval = run_attograd("eval '" + run + "'");
  BOOST_TEST(eval.exit_code == 0, eval.err);
  // And once there is room again, the run resumes from the kept checkpoint.
  BOOST_TEST(run_attograd("train --resume '" + run + "' --set train.steps=40").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(sigterm_checkpoints_like_ctrl_c) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  const pid_t pid =
      spawn_attograd(kTiny + " --set train.steps=100000 --set output.checkpoint_every=0 --out '" + run + "'");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         count_lines(testing::read_all(run + "/metrics.jsonl")) < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGTERM);
  const int status = wait_status(pid);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 130);
  BOOST_TEST(fs::exists(run + "/checkpoint/model.safetensors"));
}

BOOST_AUTO_TEST_CASE(overwrite_then_a_crash_cannot_resume_the_old_run) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  BOOST_REQUIRE(run_attograd(kTiny + " --set train.steps=5 --out '" + run + "'").exit_code == 0);
  // A new run over it, killed before its first checkpoint (a long first eval keeps it busy).
  const pid_t pid = spawn_attograd(kTiny +
                                   " --set train.steps=100000 --set output.checkpoint_every=0"
                                   " --set seed=7 --out '" +
                                   run + "' --overwrite");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // Killed once the new run has written its config and logged a step (the old run's files are gone then).
  while (std::chrono::steady_clock::now() < deadline &&
         (testing::read_all(run + "/config.json").find("\"seed\": 7") == std::string::npos ||
          count_lines(testing::read_all(run + "/metrics.jsonl")) < 1))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGKILL);
  wait_status(pid);
  BOOST_TEST(!fs::exists(run + "/checkpoint/model.safetensors"));
  const auto resume = run_attograd("train --resume '" + run + "'");
  BOOST_TEST(resume.exit_code == 2);
  BOOST_TEST(count_lines(resume.err) == 1, resume.err);
}
