// `attograd sweep` as a user meets it: bad sweep files give one line, exit 2 and write nothing; a sweep
// stopped with Ctrl-C (SIGINT to the sweep) and run again ends with the same summary numbers and the same
// model tensors as one never stopped; `--print-commands | xargs -P 2` then `sweep collect` gives the same
// summary.json as `sweep -j 2`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_attograd;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// A base config that trains in well under a second per run, with dumps, evals and checkpoints along the way.
std::string tiny_base(const testing::TempDir& dir, int steps) {
  const std::string path = dir.file("base.json");
  write(path, R"({"name": "tiny", "task": {"kind": "reverse", "vocab": 5, "length": 3},
    "model": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16},
    "train": {"steps": )" +
                  std::to_string(steps) +
                  R"(, "batch_size": 8, "warmup": 5, "eval_every": 20, "log_every": 10, "eval_size": 32},
    "output": {"attention_every": 20, "probes": 2, "checkpoint_every": 40}})");
  return path;
}

std::string sweep_file(const testing::TempDir& dir, const std::string& name, const std::string& base,
                       const std::string& grid, const std::string& out) {
  const std::string path = dir.file(name);
  write(path, R"({"base": ")" + base + R"(", "grid": )" + grid + R"(, "out": ")" + out + "\"}");
  return path;
}

// Each bad sweep file: exit 2, exactly one line on stderr containing `expected`, nothing written.
void expect_bad(const std::string& text, const std::string& expected) {
  testing::TempDir dir;
  const std::string base = tiny_base(dir, 10);
  std::string body = text;
  for (const std::string& key : {std::string("BASE"), std::string("OUT")}) {
    const size_t at = body.find(key);
    if (at != std::string::npos) body.replace(at, key.size(), key == "BASE" ? base : dir.file("out"));
  }
  write(dir.file("sweep.json"), body);
  const auto r = run_attograd("sweep '" + dir.file("sweep.json") + "'");
  BOOST_TEST(r.exit_code == 2, text << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(count_lines(r.err) == 1, text << " -> " << r.err);
  BOOST_TEST(r.err.find(expected) != std::string::npos, text << " -> " << r.err);
  BOOST_TEST(!fs::exists(dir.file("out")), text << " wrote the out folder");
  BOOST_TEST(r.out.empty(), text << " printed " << r.out);
}

// summary.json without what differs between two equal runs (time, speed) or two sweeps (their folder).
json comparable_summary(const std::string& out) {
  json j = json::parse(testing::read_all(out + "/summary.json"));
  j.erase("out");
  for (json& r : j["runs"]) {
    r.erase("wall_seconds");
    r.erase("tokens_per_s");
  }
  return j;
}

void expect_same_tensors(const std::string& a_run, const std::string& b_run) {
  const train::SafetensorsFile a = train::read_safetensors(a_run + "/checkpoint/model.safetensors");
  const train::SafetensorsFile b = train::read_safetensors(b_run + "/checkpoint/model.safetensors");
  BOOST_REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    BOOST_TEST(a.tensors[i].name == b.tensors[i].name);
    BOOST_TEST(
        std::memcmp(a.tensors[i].data.data(), b.tensors[i].data.data(), a.tensors[i].data.size() * 4) == 0,
        a_run << ": " << a.tensors[i].name << " differs from " << b_run);
  }
  BOOST_TEST(a.metadata.at("step") == b.metadata.at("step"));
}

const char* kGrid = R"({"seed": [1, 2], "model.d_model": [8, 12]})";
const std::vector<std::string> kRuns = {"seed=1,d_model=8", "seed=1,d_model=12", "seed=2,d_model=8",
                                        "seed=2,d_model=12"};

}  // namespace

BOOST_AUTO_TEST_CASE(bad_sweep_files_are_one_line_and_write_nothing) {
  expect_bad(R"({"base": "BASE", "grid": {"train.stepz": [1, 2]}, "out": "OUT"})",
             "/train/stepz: unknown key");
  expect_bad(R"({"base": "BASE", "gird": {"seed": [1]}, "out": "OUT"})", "/gird: unknown key");
  expect_bad(R"({"base": "BASE", "grid": {}, "out": "OUT"})", "/grid: empty grid");
  expect_bad(R"({"base": "BASE", "grid": {"seed": []}, "out": "OUT"})", "/grid/seed: empty list of values");
  expect_bad(R"({"base": "BASE", "grid": {"seed": 3}, "out": "OUT"})", "/grid/seed: expected an array");
  expect_bad(R"({"base": "BASE", "grid": {"train.steps": [10, "ten"]}, "out": "OUT"})",
             "--set train.steps=\"ten\": /train/steps: expected an integer");
  expect_bad(R"({"base": "BASE", "grid": {"model.d_model": [8, 9]}, "out": "OUT"})",
             "/model/n_heads: 2 does not divide d_model 9");
  expect_bad(R"({"base": "BASE", "grid": {"output.dir": ["x"]}, "out": "OUT"})", "/grid/output.dir");
  expect_bad(R"({"base": "BASE/nope", "grid": {"seed": [1]}, "out": "OUT"})", "/base:");
  expect_bad(R"({"base": "BASE", "grid": {"seed": [1, 1]}, "out": "OUT"})", "/grid/seed/1: duplicate value");
  std::string seeds, steps;
  for (int i = 0; i <= 100; ++i) {
    seeds += (i ? "," : "") + std::to_string(i);
    steps += (i ? "," : "") + std::to_string(i + 1);
  }
  expect_bad(R"({"base": "BASE", "grid": {"seed": [)" + seeds + R"(], "train.steps": [)" + steps +
                 R"(]}, "out": "OUT"})",
             "more than 10000 runs");
  expect_bad("{\"base\": \"BASE\", \"grid\": {\"seed\": [1]}, \"out\": \"OUT\"", "malformed JSON");

  // An out folder that is a file.
  testing::TempDir dir;
  write(dir.file("taken"), "a file");
  const std::string sweep = sweep_file(dir, "s.json", tiny_base(dir, 10), kGrid, dir.file("taken"));
  const auto r = run_attograd("sweep '" + sweep + "'");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(count_lines(r.err) == 1, r.err);
  BOOST_TEST(r.err.find("/out: " + dir.file("taken") + " is a file") != std::string::npos, r.err);
  BOOST_TEST(testing::read_all(dir.file("taken")) == "a file");
}

BOOST_AUTO_TEST_CASE(ctrl_c_then_rerun_matches_an_uninterrupted_sweep) {
  testing::TempDir dir;
  const std::string base = tiny_base(dir, 1000);
  const std::string full = dir.file("full"), stopped = dir.file("stopped");
  const auto r = run_attograd("sweep '" + sweep_file(dir, "full.json", base, kGrid, full) + "' -j 2");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  for (const std::string& name : kRuns) BOOST_TEST(fs::exists(full + "/" + name + "/report.html"), name);

  // The same sweep elsewhere, one run at a time; Ctrl-C once the second run is part-way through.
  const std::string sweep = sweep_file(dir, "stopped.json", base, kGrid, stopped);
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("cd '") + ATTOGRAD_SOURCE_DIR + "' && exec '" + ATTOGRAD_BINARY +
                            "' sweep '" + sweep + "' -j 1 >'" + dir.file("stopped.log") + "' 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string second = stopped + "/" + kRuns[1];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline &&
         count_lines(testing::read_all(second + "/metrics.jsonl")) < 6)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = testing::read_all(dir.file("stopped.log"));
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 130, "the sweep finished before Ctrl-C arrived, or crashed: " << log);
  BOOST_TEST(fs::exists(second + "/checkpoint/model.safetensors"), log);
  BOOST_TEST(!fs::exists(second + "/scores.json"), "the second run was not stopped part-way: " << log);
  BOOST_TEST(!fs::exists(stopped + "/" + kRuns[2]), "a run started after Ctrl-C");
  BOOST_TEST(json::parse(testing::read_all(stopped + "/summary.json"))["runs"][1]["status"] == "interrupted");

  // Killed later (SIGKILL, or scancel past Slurm's KillWait), the run would have logged steps beyond its
  // checkpoint, which a resume drops: the uninterrupted run's lines (the same numbers) stand in for them.
  // The summary reports the run as of its checkpoint: its step, and the last loss logged up to it.
  const std::string model = second + "/checkpoint/model.safetensors";
  const auto checkpoint_step =
      static_cast<int64_t>(train::metadata_u64(train::read_safetensors_header(model), "step", model));
  std::istringstream full_log(testing::read_all(full + "/" + kRuns[1] + "/metrics.jsonl"));
  std::string line, beyond;
  json last_kept;
  while (std::getline(full_log, line))
    if (json::parse(line)["step"].get<int64_t>() > checkpoint_step)
      beyond += line + "\n";
    else
      last_kept = json::parse(line);
  BOOST_REQUIRE_MESSAGE(!beyond.empty() && !last_kept.is_null(), "checkpoint at step " << checkpoint_step);
  std::ofstream(second + "/metrics.jsonl", std::ios::app) << beyond;
  const auto collected = run_attograd("sweep collect '" + stopped + "'");
  BOOST_REQUIRE_MESSAGE(collected.exit_code == 0, collected.err);
  const json killed = json::parse(testing::read_all(stopped + "/summary.json"))["runs"][1];
  BOOST_TEST(killed["status"] == "interrupted");
  BOOST_TEST(killed["step"] == checkpoint_step, killed.dump());
  BOOST_TEST(killed["train_loss"] == last_kept["loss"], killed.dump() << " vs " << last_kept.dump());

  const auto again = run_attograd("sweep '" + sweep + "' -j 1");
  BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.out + again.err);
  BOOST_TEST(again.out.find("4 runs (1 finished already)") != std::string::npos, again.out);
  BOOST_TEST(comparable_summary(stopped) == comparable_summary(full));
  for (const std::string& name : kRuns) expect_same_tensors(stopped + "/" + name, full + "/" + name);

  // Everything finished: a third run of the command trains nothing.
  const auto third = run_attograd("sweep '" + sweep + "' -j 1");
  BOOST_TEST(third.exit_code == 0, third.err);
  BOOST_TEST(third.out.find("4 runs (4 finished already)") != std::string::npos, third.out);
}

BOOST_AUTO_TEST_CASE(printed_commands_through_xargs_then_collect_match_the_sweep) {
  testing::TempDir dir;
  const std::string base = tiny_base(dir, 60);
  const std::string local = dir.file("local"), remote = dir.file("remote");
  const auto r = run_attograd("sweep '" + sweep_file(dir, "local.json", base, kGrid, local) + "' -j 2");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);

  const std::string sweep = sweep_file(dir, "remote.json", base, kGrid, remote);
  const auto printed = run_attograd("sweep '" + sweep + "' --print-commands");
  BOOST_REQUIRE_MESSAGE(printed.exit_code == 0, printed.err);
  BOOST_TEST(count_lines(printed.out) == 4, printed.out);
  BOOST_TEST(printed.out.find(" train ") != std::string::npos, printed.out);
  BOOST_TEST(!fs::exists(remote + "/" + kRuns[0]), "--print-commands started a run");
  write(dir.file("cmds"), printed.out);
  const std::string xargs = "cd '" + std::string(ATTOGRAD_SOURCE_DIR) +
                            "' && xargs -P 2 -I{} sh -c '{} >/dev/null' < '" + dir.file("cmds") + "'";
  BOOST_REQUIRE(std::system(xargs.c_str()) == 0);
  const auto collected = run_attograd("sweep collect '" + remote + "'");
  BOOST_REQUIRE_MESSAGE(collected.exit_code == 0, collected.err);
  BOOST_TEST(comparable_summary(remote) == comparable_summary(local));
  const json summary = json::parse(testing::read_all(remote + "/summary.json"));
  for (const json& run : summary["runs"]) {
    BOOST_TEST(run["status"] == "finished");
    BOOST_TEST(run["phase_change"].contains("eval_loss_fastest_fall"));
    BOOST_TEST(!run["curves"]["previous_token"].empty());
    BOOST_TEST(run["best"]["duplicate_token"]["value"].is_number(), run["best"].dump());
  }
  const std::string html = testing::read_all(remote + "/index.html");
  for (const std::string& name : kRuns)
    BOOST_TEST(html.find("href=\"" + name + "/report.html\"") != std::string::npos, name);
  const std::string csv = testing::read_all(remote + "/summary.csv");
  BOOST_TEST(count_lines(csv) == 5, csv);
  BOOST_TEST(csv.find(",best_duplicate_token_head,best_duplicate_token,") != std::string::npos);

  // Collecting a folder that is no sweep is one line and exit 2.
  const auto bad = run_attograd("sweep collect '" + dir.file("nothing") + "'");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(count_lines(bad.err) == 1, bad.err);
}
