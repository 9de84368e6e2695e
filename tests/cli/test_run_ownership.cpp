// A run folder nobody else can break, and no input that hangs, aborts or deletes: the ten findings of the
// third reliability audit (issue 32), each reproduced from the command line. Every case ends in bounded
// time (a command that would hang or allocate without bound runs under `timeout` and a memory limit).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "io/printable.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using testing::run_attograd;
using testing::shell_quote;

namespace {

const std::string kSmall =
    " --set model.d_model=16 --set model.n_heads=2 --set model.n_layers=1 --set model.d_ff=32"
    " --set train.batch_size=8 --set train.eval_size=16 --set output.attention_every=0 --set train.threads=1";

bool one_printable_line(const std::string& err) {
  return err.size() > 1 && err.back() == '\n' && err.find('\n') == err.size() - 1 &&
         io::is_printable_utf8(err.substr(0, err.size() - 1));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Exit 2 with one printable line holding `expected`.
void expect_refused(const testing::CommandResult& r, const std::string& expected, const std::string& what) {
  BOOST_TEST(r.exit_code == 2, what << " -> " << r.exit_code << ": " << r.err);
  BOOST_TEST(one_printable_line(r.err), what << " -> " << r.err);
  BOOST_TEST(has(r.err, expected), what << " -> " << r.err);
}

// A 4 GB address-space limit, except under ASan, which reserves terabytes of address space for its shadow
// (GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTOGRAD_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ATTOGRAD_TEST_ASAN)
const std::string kMemoryLimit = "";
#else
const std::string kMemoryLimit = "ulimit -v 4000000; ";
#endif

// `attograd ARGS` killed after `seconds` (exit 137 then) and limited to 4 GB of address space: what would
// hang or allocate without bound fails its test instead.
testing::CommandResult run_bounded(const std::string& args, int seconds = 30) {
  static int counter = 0;
  const std::string base = (fs::temp_directory_path() / ("attograd-bounded-" + std::to_string(::getpid()) +
                                                         "-" + std::to_string(counter++)))
                               .string();
  const std::string cmd = "cd " + shell_quote(ATTOGRAD_SOURCE_DIR) + " && (" + kMemoryLimit +
                          "exec timeout -s KILL " + std::to_string(seconds) + " " +
                          shell_quote(ATTOGRAD_BINARY) + " " + args + ") >" + shell_quote(base + ".out") +
                          " 2>" + shell_quote(base + ".err");
  const int status = std::system(cmd.c_str());
  testing::CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = testing::read_all(base + ".out");
  r.err = testing::read_all(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

std::string train_small(const std::string& run, const std::string& extra = "") {
  const auto r = run_attograd("train configs/reverse.json --set train.steps=3" + kSmall + extra + " --out " +
                              shell_quote(run));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return run;
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Starts `attograd ARGS` in the background (output discarded); the caller kills and reaps it.
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

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

void wait_for_file(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_REQUIRE_MESSAGE(fs::exists(path), path << " never appeared");
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

// Sets one weight (or moment) of a safetensors file.
void set_value(const std::string& path, const std::string& tensor, float value) {
  train::SafetensorsFile f = train::read_safetensors(path);
  for (auto& t : f.tensors)
    if (t.name == tensor) t.data[0] = value;
  train::write_safetensors(path, f.tensors, f.metadata);
}

}  // namespace

// Finding 1: a folder that is not a run is never written into or cleaned, with or without --overwrite;
// --overwrite of a run removes only the run's own entries, and stale temporary files go from the run's own
// folders only, never through a link.
BOOST_AUTO_TEST_CASE(train_never_writes_or_deletes_in_a_folder_that_is_not_a_run) {
  testing::TempDir dir;
  const std::string d = dir.file("D");
  write_file(d + "/scores/grades.xlsx", "x");
  write_file(d + "/sub/report.tmp.1.docx", "y");
  for (const std::string overwrite : {"", " --overwrite"}) {
    const auto r = run_attograd("train configs/reverse.json --set train.steps=2" + kSmall + " --out " +
                                shell_quote(d) + overwrite);
    expect_refused(r, d + ": not empty and not a run folder", "train into D" + overwrite);
    BOOST_TEST(testing::read_all(d + "/scores/grades.xlsx") == "x");
    BOOST_TEST(testing::read_all(d + "/sub/report.tmp.1.docx") == "y");
    BOOST_TEST(!fs::exists(d + "/config.json"));
  }

  const std::string run = train_small(dir.file("run"));
  write_file(run + "/notes.txt", "mine");
  write_file(run + "/extra/keep.tmp.1.2", "mine too");
  write_file(dir.file("outside/far.tmp.3.4"), "outside");
  fs::create_directory_symlink(dir.file("outside"), run + "/linked");
  write_file(run + "/checkpoint/model.safetensors.tmp.999999.0", "stale");
  const auto again = run_attograd("train configs/reverse.json --set train.steps=2" + kSmall + " --out " +
                                  shell_quote(run) + " --overwrite");
  BOOST_TEST(again.exit_code == 0, again.err);
  BOOST_TEST(testing::read_all(run + "/notes.txt") == "mine");
  BOOST_TEST(fs::exists(run + "/extra/keep.tmp.1.2"));
  BOOST_TEST(fs::exists(dir.file("outside/far.tmp.3.4")));
  BOOST_TEST(!fs::exists(run + "/checkpoint/model.safetensors.tmp.999999.0"));
}

// Finding 2: an output path the user names is written through a symlink and never replaces a FIFO, a
// device or a folder (those are refused, exit 2).
BOOST_AUTO_TEST_CASE(svg_and_slurm_outputs_never_replace_devices_fifos_folders_or_links) {
  testing::TempDir dir;
  const std::string run = train_small(dir.file("run"));
  const std::string attend = "attend " + shell_quote(run) + " --tokens '3 1 4' --svg ";
  BOOST_REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0644) == 0);
  expect_refused(run_bounded(attend + shell_quote(dir.file("fifo"))), "is a FIFO", "--svg FIFO");
  BOOST_TEST(is_fifo(dir.file("fifo")));
  fs::create_directory(dir.file("folder"));
  expect_refused(run_attograd(attend + shell_quote(dir.file("folder"))), "is a folder", "--svg folder");
  BOOST_TEST(fs::is_directory(dir.file("folder")));
  fs::create_symlink("/dev/null", dir.file("null-link"));
  expect_refused(run_attograd(attend + shell_quote(dir.file("null-link"))), "character device",
                 "--svg link to /dev/null");
  BOOST_TEST(fs::is_symlink(dir.file("null-link")));

  write_file(dir.file("target.svg"), "old");
  fs::create_symlink("target.svg", dir.file("link.svg"));
  const auto through = run_attograd(attend + shell_quote(dir.file("link.svg")));
  BOOST_TEST(through.exit_code == 0, through.err);
  BOOST_TEST(fs::is_symlink(dir.file("link.svg")));
  BOOST_TEST(has(testing::read_all(dir.file("target.svg")), "<svg"));

  write_file(dir.file("sweep.json"),
             "{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1]}, \"out\": " +
                 nlohmann::json(dir.file("s")).dump() + "}");
  write_file(dir.file("job.sh"), "old");
  fs::create_symlink("job.sh", dir.file("job-link.sh"));
  const auto slurm = run_attograd("sweep " + shell_quote(dir.file("sweep.json")) + " --slurm " +
                                  shell_quote(dir.file("job-link.sh")));
  BOOST_TEST(slurm.exit_code == 0, slurm.err);
  BOOST_TEST(fs::is_symlink(dir.file("job-link.sh")));
  BOOST_TEST(has(testing::read_all(dir.file("job.sh")), "#SBATCH"));
  // The script's (queued) task owns the run now, and there is no cluster to ask whether it still does
  // (test_sweep_slurm.cpp checks that): the run is given back.
  fs::remove(dir.file("s/seed=1/.attograd-slurm-job"));
  expect_refused(run_bounded("sweep " + shell_quote(dir.file("sweep.json")) + " --slurm " +
                             shell_quote(dir.file("fifo"))),
                 "is a FIFO", "--slurm FIFO");
  BOOST_TEST(is_fifo(dir.file("fifo")));
}

// Finding 3: one writer per run folder; a second one is refused at once naming the holder's pid, and a
// killed holder leaves no stale lock.
BOOST_AUTO_TEST_CASE(a_second_writer_of_a_run_folder_is_refused_naming_the_holder) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  const pid_t holder = spawn_attograd("train configs/reverse.json --set train.steps=1000000" + kSmall +
                                      " --set output.checkpoint_every=0 --out " + shell_quote(run));
  wait_for_file(run + "/config.json");
  const auto start = std::chrono::steady_clock::now();
  const auto second = run_attograd("train configs/reverse.json --set seed=2 --set train.steps=5" + kSmall +
                                   " --out " + shell_quote(run));
  expect_refused(second, "(pid ", "a second train");
  BOOST_TEST(has(second.err, "in use by another attograd process"), second.err);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10);
  BOOST_TEST(nlohmann::json::parse(testing::read_all(run + "/config.json"))["seed"] == 42);
  kill_and_reap(holder);
  // flock died with the holder: the folder is free again.
  const auto after = run_attograd("train configs/reverse.json --set train.steps=2" + kSmall + " --out " +
                                  shell_quote(run) + " --overwrite");
  BOOST_TEST(after.exit_code == 0, after.err);

  // Two sweeps on one folder: the second is refused at once.
  const std::string out = dir.file("out");
  write_file(dir.file("sweep.json"),
             "{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1]}, \"out\": " +
                 nlohmann::json(out).dump() + "}");
  const pid_t sweep = spawn_attograd("sweep " + shell_quote(dir.file("sweep.json")) + " -j 1");
  wait_for_file(out + "/seed=1/config.json");
  expect_refused(run_attograd("sweep " + shell_quote(dir.file("sweep.json")) + " --print-commands"), "(pid ",
                 "a second sweep");
  kill(sweep, SIGINT);  // the sweep stops its run at a checkpoint (SIGKILL would orphan the run)
  int status = 0;
  waitpid(sweep, &status, 0);
}

// Finding 4: --out is checked (UTF-8, no control bytes) before anything is trained or created.
BOOST_AUTO_TEST_CASE(an_out_folder_that_config_json_could_not_hold_is_refused_first) {
  testing::TempDir dir;
  for (const std::string bad : {"run\\nx", "run\\377x"}) {
    const auto r = run_attograd("train configs/reverse.json --set train.steps=2" + kSmall +
                                " --out \"$(printf '" + dir.file("") + bad + "')\"");
    expect_refused(r, "--out", "--out " + bad);
    BOOST_TEST(has(r.err, "expected UTF-8 text without control characters"), r.err);
    BOOST_TEST(fs::is_empty(dir.dir), bad << " left something behind");
  }
}

// Finding 5: a thread count the machine cannot start is one line, never an abort.
BOOST_AUTO_TEST_CASE(bench_with_more_threads_than_can_start_is_one_line) {
  const auto r = run_bounded("bench bench/configs/small.json --steps 1 --warmup 0 --threads 2000", 60);
  expect_refused(r, "threads 2000: must be <= ", "bench --threads 2000");  // the request's field
}

// Finding 6: weights that are not finite or beyond the bound are refused at load naming the tensor, and
// nothing is written from them.
BOOST_AUTO_TEST_CASE(bad_weights_are_refused_at_load_naming_the_tensor) {
  testing::TempDir dir;
  const std::string run = train_small(dir.file("run"));
  const std::string model = run + "/checkpoint/model.safetensors";
  const std::string good = testing::read_all(model);
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
    set_value(model, "blocks.0.attn.wq.weight", bad);
    expect_refused(run_attograd("eval " + shell_quote(run)), "blocks.0.attn.wq.weight", "eval");
    expect_refused(run_attograd("patch " + shell_quote(run) +
                                " --clean 'BOS 1 2 3' --corrupt 'BOS 4 2 3' --answer 1 --wrong 4 --save p"),
                   "blocks.0.attn.wq.weight", "patch --save");
    BOOST_TEST(!fs::exists(run + "/patching"));
  }
  write_file(model, good);
  BOOST_TEST(run_attograd("eval " + shell_quote(run)).exit_code == 0);
}

// Finding 7: a FIFO where a text file is read is refused by name, not read for ever; circuits reads any
// vocabulary within the same bound (dk x dk factors); --n is bounded by the memory estimate.
BOOST_AUTO_TEST_CASE(reads_cannot_hang_and_work_is_bounded_up_front) {
  testing::TempDir dir;
  BOOST_REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0644) == 0);
  expect_refused(run_bounded("train " + shell_quote(dir.file("fifo"))), "is a FIFO", "config FIFO");
  expect_refused(run_bounded("sweep " + shell_quote(dir.file("fifo"))), "is a FIFO", "sweep FIFO");
  const std::string run = train_small(dir.file("run"));
  fs::remove(run + "/scores.json");
  BOOST_REQUIRE(::mkfifo((run + "/scores.json").c_str(), 0644) == 0);
  expect_refused(run_bounded("ablate " + shell_quote(run)), "scores.json", "ablate with a FIFO scores.json");

  const auto start = std::chrono::steady_clock::now();
  const std::string big = dir.file("big");
  const auto trained = run_bounded("train configs/reverse.json --set train.steps=1" + kSmall +
                                   " --set model.vocab=600 --out " + shell_quote(big));
  BOOST_TEST(trained.exit_code == 0, trained.err);
  // Any vocabulary: the circuits read dk x dk factors, never a vocab x vocab matrix, so training writes them
  // and the tool reads them at vocab 600 within the same bound.
  BOOST_TEST(fs::exists(big + "/circuits.json"));
  const auto circuits = run_bounded("circuits " + shell_quote(big) + " --no-composition");
  BOOST_TEST(circuits.exit_code == 0, circuits.err);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 20);

  expect_refused(run_bounded("eval " + shell_quote(run) + " --n 2000000000"), "n 2000000000",
                 "eval --n 2000000000");
  expect_refused(run_bounded("ablate " + shell_quote(big) + " --n 2000000000"), "n 2000000000",
                 "ablate --n 2000000000");
}

// Finding 8: a sweep checks every run folder before it starts the first run.
BOOST_AUTO_TEST_CASE(a_sweep_checks_every_run_folder_before_starting_any) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  write_file(out + "/seed=2", "a file where a run folder goes");
  write_file(dir.file("sweep.json"),
             "{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1, 2]}, \"out\": " +
                 nlohmann::json(out).dump() + "}");
  const auto r = run_bounded("sweep " + shell_quote(dir.file("sweep.json")) + " -j 2");
  expect_refused(r, out + "/seed=2: is a regular file, expected a run folder", "sweep");
  BOOST_TEST(!has(r.err, "filesystem error"), r.err);
  BOOST_TEST(!fs::exists(out + "/seed=1"));
}

// Finding 9: files and folders inside a run folder are never written through a planted symlink.
BOOST_AUTO_TEST_CASE(planted_symlinks_in_a_run_folder_are_never_written_through) {
  testing::TempDir dir;
  const std::string run = train_small(dir.file("run"));
  fs::remove(run + "/metrics.jsonl");
  fs::create_symlink(dir.file("outside.jsonl"), run + "/metrics.jsonl");  // dangling
  expect_refused(run_attograd("train --resume " + shell_quote(run) + " --set train.steps=4"), "metrics.jsonl",
                 "resume with a linked metrics.jsonl");
  BOOST_TEST(!fs::exists(dir.file("outside.jsonl")));
  fs::remove(run + "/metrics.jsonl");

  fs::create_directory(dir.file("elsewhere"));
  fs::create_directory_symlink(dir.file("elsewhere"), run + "/patching");
  expect_refused(run_attograd("patch " + shell_quote(run) +
                              " --clean 'BOS 1 2 3' --corrupt 'BOS 4 2 3' --answer 1 --wrong 4 --save p"),
                 run + "/patching", "patch --save into a linked patching/");
  BOOST_TEST(fs::is_empty(dir.file("elsewhere")));

  // A sweep's train.log linked to a file outside.
  const std::string out = dir.file("out");
  write_file(dir.file("victim.txt"), "keep");
  fs::create_directories(out + "/seed=1");
  fs::create_symlink(dir.file("victim.txt"), out + "/seed=1/train.log");
  write_file(dir.file("sweep.json"),
             "{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1]}, \"out\": " +
                 nlohmann::json(out).dump() + "}");
  expect_refused(run_bounded("sweep " + shell_quote(dir.file("sweep.json"))), out + "/seed=1",
                 "sweep with a linked train.log");
  BOOST_TEST(testing::read_all(dir.file("victim.txt")) == "keep");
}

// Finding 10: exit codes and messages by the contract.
BOOST_AUTO_TEST_CASE(exit_codes_and_messages_follow_the_contract) {
  testing::TempDir dir;
  const auto sweep_file = [&](const std::string& text) {
    write_file(dir.file("sweep.json"), text);
    return "sweep " + shell_quote(dir.file("sweep.json")) + " --print-commands";
  };
  const std::string out = nlohmann::json(dir.file("s")).dump();
  expect_refused(
      run_attograd(sweep_file("{\"base\": \"configs/reverse.json\", \"grid\": {\"train.lr\": [1e400]}}")),
      "sweep.json: line 1, column", "sweep file with 1e400");
  expect_refused(run_attograd(sweep_file("{\"base\": \"configs/reverse.json\", \"grid\": {\"seed\": [1]}, "
                                         "\"grid\": {\"seed\": [2]}, \"out\": " +
                                         out + "}")),
                 "/grid: duplicate key", "sweep file with a duplicate key");
  expect_refused(
      run_attograd(sweep_file("{\"base\": \"configs/reverse.json\", \"grid\": {\"train.threads\": [1, 2]}, "
                              "\"out\": " +
                              out + "}")),
      "/grid/train.threads", "sweep grid over train.threads");

  write_file(dir.file("c/sweep.json"), "{\"base\": 3, \"grid\": {}, \"runs\": []}");
  expect_refused(run_attograd("sweep collect " + shell_quote(dir.file("c"))), "/base",
                 "collect, numeric base");

  const std::string run = train_small(dir.file("run"));
  write_file(dir.file("file"), "x");
  expect_refused(
      run_attograd("train configs/reverse.json" + kSmall + " --out " + shell_quote(dir.file("file"))),
      "is a regular file, expected a run folder", "--out a file");
  // A folder that cannot be written (a read-only file system): exit 1, one line.
  const auto ro =
      run_attograd("train configs/reverse.json --set train.steps=2" + kSmall + " --out /sys/attograd-run");
  BOOST_TEST(ro.exit_code == 1, ro.err);
  BOOST_TEST(one_printable_line(ro.err), ro.err);
  BOOST_TEST(!has(ro.err, "filesystem error"), ro.err);

  expect_refused(run_attograd("patch " + shell_quote(run) +
                              " --clean 'BOS 1 2 3' --corrupt 'BOS 4 2 3' --answer 1 "
                              "--wrong 4 --save " +
                              std::string(300, 'n')),
                 "NAME", "--save with a long name");
  fs::create_directory(dir.file("svgdir"));
  expect_refused(
      run_attograd("attend " + shell_quote(run) + " --tokens '1 2' --svg " + shell_quote(dir.file("svgdir"))),
      "is a folder", "--svg a folder");
  for (const std::string tolerance : {"nan", "-1"})
    expect_refused(run_attograd("gradcheck configs/reverse.json" + kSmall + " --tolerance " + tolerance),
                   "--tolerance", "--tolerance " + tolerance);

  const auto past = run_attograd("train --resume " + shell_quote(run) + " --set train.steps=2");
  expect_refused(past, "below the checkpoint's step 3", "--resume with fewer steps");

  const std::string optimizer = run + "/checkpoint/optimizer-000003.safetensors";
  const std::string good = testing::read_all(optimizer);
  set_value(optimizer, "m.lm_head.weight", std::numeric_limits<float>::quiet_NaN());
  expect_refused(run_attograd("train --resume " + shell_quote(run) + " --set train.steps=5"),
                 "m.lm_head.weight", "NaN moments");
  write_file(optimizer, good);
}

// Finding 10, last item: one torn run does not stop `sweep collect` summarising the others.
BOOST_AUTO_TEST_CASE(sweep_collect_reports_a_torn_run_and_summarises_the_rest) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  write_file(dir.file("base.json"), R"({"task": {"kind": "reverse", "vocab": 10, "length": 8},
    "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
    "train": {"steps": 2, "batch_size": 8, "eval_size": 16, "log_every": 1},
    "output": {"attention_every": 0}})");
  write_file(dir.file("sweep.json"),
             "{\"base\": " + nlohmann::json(dir.file("base.json")).dump() +
                 ", \"grid\": {\"seed\": [1, 2]}, \"out\": " + nlohmann::json(out).dump() + "}");
  const auto swept = run_bounded("sweep " + shell_quote(dir.file("sweep.json")) + " -j 1", 120);
  BOOST_REQUIRE_MESSAGE(swept.exit_code == 0, swept.out << swept.err);
  std::string metrics = testing::read_all(out + "/seed=1/metrics.jsonl");
  metrics.insert(metrics.find('\n') + 1, "{\"step\": 1, \"lo\n");
  write_file(out + "/seed=1/metrics.jsonl", metrics);
  const auto r = run_attograd("sweep collect " + shell_quote(out));
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.err, "seed=1"), r.err);
  const nlohmann::json summary = nlohmann::json::parse(testing::read_all(out + "/summary.json"));
  std::map<std::string, std::string> status;
  for (const auto& run : summary["runs"]) status[run["name"]] = run["status"];
  BOOST_TEST(status["seed=1"] == "unreadable");
  BOOST_TEST(status["seed=2"] == "finished");
}
