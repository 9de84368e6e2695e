// `attograd sweep --slurm` without a cluster: the script works from any folder (absolute, quoted paths
// under a folder named with a space, quotes, # and %), asks for the runs' train.threads as
// --cpus-per-task, and runs a task under bash as Slurm would; a run owned by a queued or running array
// task is skipped when the script is regenerated, and an owner left by a killed task is found stale by its
// job id. squeue is a fake on PATH that answers what each case needs and logs how it was asked.
// tests/slurm/sweep_on_slurm.py does the same on a real single-node cluster.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_all;
using testing::shell_quote;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Runs `attograd ARGS` in `cwd` with `env` (NAME=value words, quoted) before it.
testing::CommandResult run_in(const std::string& cwd, const std::string& env, const std::string& args) {
  static int counter = 0;
  const std::string base = (fs::temp_directory_path() / ("attograd-slurm-" + std::to_string(::getpid()) +
                                                         "-" + std::to_string(counter++)))
                               .string();
  const std::string cmd = "cd " + shell_quote(cwd) + " && env " + env + " " + shell_quote(ATTOGRAD_BINARY) +
                          " " + args + " >" + shell_quote(base + ".out") + " 2>" + shell_quote(base + ".err");
  const int status = std::system(cmd.c_str());
  testing::CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(base + ".out");
  r.err = read_all(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

// A folder whose name a shell or sbatch would split, comment out or expand if it were not quoted.
std::string awkward_folder(const testing::TempDir& dir) {
  const std::string path = dir.file("a b 'q' #c %d $e");
  fs::create_directories(path);
  return path;
}

// Two runs of a tiny config asking for one thread (this machine's default would be cores / 1).
void write_sweep(const std::string& folder, int steps) {
  write(folder + "/base.json", R"({"name": "tiny", "task": {"kind": "reverse", "vocab": 5, "length": 3},
    "model": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16},
    "train": {"steps": )" + std::to_string(steps) +
                                   R"(, "batch_size": 8, "warmup": 5, "eval_every": 20, "log_every": 10,
              "eval_size": 32, "threads": 1},
    "output": {"attention_every": 20, "probes": 2, "checkpoint_every": 40}})");
  write(folder + "/s.json", R"({"base": "base.json", "grid": {"seed": [1, 2]}, "out": "runs/s"})");
}

// A fake squeue: logs its arguments to LOG; answers a query by job id (--jobs=) with one text and exit
// code, and a query of an array's tasks by name with another.
struct FakeSqueue {
  std::string bin, dir, log;
  explicit FakeSqueue(const testing::TempDir& temp)
      : bin(temp.file("bin")), dir(temp.dir.string()), log(temp.file("squeue.log")) {
    fs::create_directories(bin);
    write(bin + "/squeue", "#!/bin/sh\necho \"$*\" >> " + shell_quote(log) +
                               "\ncase \"$*\" in *--jobs=*) k=jobs ;; *) k=array ;; esac\ncd " +
                               shell_quote(dir) + " && cat $k.answer && exit $(cat $k.code)\n");
    fs::permissions(bin + "/squeue", fs::perms::owner_all);
    says("", 0, "", 0);
  }
  void says(const std::string& jobs, int jobs_code, const std::string& array, int array_code) const {
    write(dir + "/jobs.answer", jobs);
    write(dir + "/jobs.code", std::to_string(jobs_code));
    write(dir + "/array.answer", array);
    write(dir + "/array.code", std::to_string(array_code));
    write(log, "");
  }
  std::string env() const { return "PATH=" + shell_quote(bin + ":" + std::string(std::getenv("PATH"))); }
};

json owner_of(const std::string& run) {
  return json::parse(read_all(run + "/.attograd-slurm-job"));
}

// The text between `#SBATCH --NAME=` and the end of its line.
std::string sbatch_value(const std::string& script, const std::string& name) {
  const std::string key = "#SBATCH --" + name + "=";
  const size_t at = script.find(key);
  if (at == std::string::npos) return "(no " + key + ")";
  return script.substr(at + key.size(), script.find('\n', at) - at - key.size());
}

// Runs array task `task` of `script` under bash as slurmd would (its env), from the root folder.
int run_task(const std::string& script, int task, const std::string& job_id) {
  const std::string cmd = "cd / && SLURM_ARRAY_TASK_ID=" + std::to_string(task) + " SLURM_JOB_ID=" + job_id +
                          " bash " + shell_quote(script) + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_script_runs_from_any_folder_with_every_path_absolute_and_quoted) {
  testing::TempDir dir;
  const std::string folder = awkward_folder(dir);
  write_sweep(folder, 60);
  const auto r = run_in(folder, "", "sweep s.json --slurm s.sbatch");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const std::string script = read_all(folder + "/s.sbatch");
  // sbatch reads a double-quoted word; the log's folder keeps its % as %%, Slurm's %A_%a stay.
  BOOST_TEST(sbatch_value(script, "chdir") == "\"" + folder + "\"", script);
  BOOST_TEST(
      sbatch_value(script, "output") == "\"" + dir.file("a b 'q' #c %%d $e") + "/runs/s/slurm-%A_%a.log\"",
      script);
  BOOST_TEST(sbatch_value(script, "cpus-per-task") == "1", "the runs' train.threads: " << script);
  BOOST_TEST(sbatch_value(script, "array") == "0-1");
  BOOST_TEST(script.find("--set train.threads=1") != std::string::npos, script);
  BOOST_TEST(script.find("cd '" + dir.dir.string() + "/a b '\\''q'\\'' #c %d $e'\n") != std::string::npos,
             script);

  // Each run is the array's, queued: its owner file names the script's job and the task.
  const std::string job_name = sbatch_value(script, "job-name");
  BOOST_TEST(job_name.rfind("attograd-sweep-", 0) == 0, job_name);
  for (int task = 0; task < 2; ++task) {
    const json owner = owner_of(folder + "/runs/s/seed=" + std::to_string(task + 1));
    BOOST_TEST(owner == json({{"job_name", job_name}, {"task", task}, {"job_id", ""}}), owner.dump());
  }

  // Task 1 under bash from /, as slurmd runs it: it trains its run to the end and releases it.
  BOOST_TEST(run_task(folder + "/s.sbatch", 1, "4242") == 0);
  const std::string run = folder + "/runs/s/seed=2";
  BOOST_TEST(json::parse(read_all(run + "/scores.json"))["step"] == 60);
  BOOST_TEST(!fs::exists(run + "/.attograd-slurm-job"), "the task left its owner file");
  BOOST_TEST(fs::exists(folder + "/runs/s/seed=1/.attograd-slurm-job"), "task 1 released task 0's run");
  BOOST_TEST(run_task(folder + "/s.sbatch", 7, "4243") == 2, "a task index beyond the array");

  // --cpus-per-task overrides train.threads, for the script and for each run.
  FakeSqueue squeue(dir);
  squeue.says("", 0, "0 PENDING\n", 0);  // task 0 of the first script is still queued: not resubmitted
  const auto again = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch --cpus-per-task 3");
  BOOST_REQUIRE_MESSAGE(again.exit_code == 2, again.err);
  BOOST_TEST(again.err.find("run seed=1: skipped, Slurm array " + job_name + " task 0 (PENDING)") !=
                 std::string::npos,
             again.err);
  BOOST_TEST(
      again.err.find("no run to submit: 1 owned by queued or running Slurm tasks") != std::string::npos,
      again.err);
  squeue.says("", 0, "", 0);  // ...and then it is gone from the queue
  const auto third = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch --cpus-per-task 3");
  BOOST_REQUIRE_MESSAGE(third.exit_code == 0, third.err);
  const std::string script2 = read_all(folder + "/s2.sbatch");
  BOOST_TEST(sbatch_value(script2, "cpus-per-task") == "3");
  BOOST_TEST(sbatch_value(script2, "array") == "0-0", "the finished run is not in the array");
  BOOST_TEST(script2.find("--set train.threads=3") != std::string::npos, script2);
  BOOST_TEST(script2.find("seed=2") == std::string::npos, script2);

  // --cpus-per-task means nothing without --slurm; and it is a count.
  for (const std::string& args : {std::string("sweep s.json --cpus-per-task 2"),
                                  std::string("sweep s.json --slurm x.sbatch --cpus-per-task 0")}) {
    const auto bad = run_in(folder, "", args);
    BOOST_TEST(bad.exit_code == 2, args << ": " << bad.err);
    BOOST_TEST(count_lines(bad.err) == 1, args << ": " << bad.err);
    BOOST_TEST(bad.err.find("--cpus-per-task") != std::string::npos, args << ": " << bad.err);
  }
}

BOOST_AUTO_TEST_CASE(a_run_owned_by_a_live_task_is_skipped_and_a_killed_tasks_owner_is_stale) {
  testing::TempDir dir;
  const std::string folder = dir.file("sweep");
  fs::create_directories(folder);
  write_sweep(folder, 100000);
  FakeSqueue squeue(dir);
  const auto r = run_in(folder, squeue.env(), "sweep s.json --slurm s.sbatch");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const std::string script = read_all(folder + "/s.sbatch");
  const std::string job_name = sbatch_value(script, "job-name");
  BOOST_TEST(read_all(squeue.log).empty(), "no owner yet, squeue asked: " << read_all(squeue.log));

  // Both tasks queued: regenerating submits nothing, and asks squeue for the array's tasks by name.
  squeue.says("", 0, "0 PENDING\n1 PENDING\n", 0);
  const auto queued = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch");
  BOOST_TEST(queued.exit_code == 2, queued.err);
  BOOST_TEST(queued.err.find("no run to submit: 2 owned") != std::string::npos, queued.err);
  BOOST_TEST(read_all(squeue.log).find("--array --name=" + job_name + " --format=%K %T") != std::string::npos,
             read_all(squeue.log));
  BOOST_TEST(!fs::exists(folder + "/s2.sbatch"));

  // Task 0 starts (bash, job id 9001): its owner file now names its job id.
  const std::string run0 = folder + "/runs/s/seed=1";
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const std::string cmd = "cd / && SLURM_ARRAY_TASK_ID=0 SLURM_JOB_ID=9001 exec bash " +
                            shell_quote(folder + "/s.sbatch") + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const auto trained = [&] {
    return fs::exists(run0 + "/checkpoint/model.safetensors") &&
           count_lines(read_all(run0 + "/metrics.jsonl")) >= 5;
  };
  while (std::chrono::steady_clock::now() < deadline && !trained())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));

  // While it trains (holding the run's lock) and Slurm says it runs, with task 1 still queued, nothing is
  // resubmitted: the run is left to its task, not refused as in use. A started task is asked for by id.
  squeue.says("RUNNING\n", 0, "1 PENDING\n", 0);
  const auto running = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch");
  const bool still_training = ::kill(-pid, 0) == 0 && !fs::exists(run0 + "/scores.json");

  // Then the whole task is killed with SIGKILL at once: its owner file stays, naming its job id.
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_REQUIRE_MESSAGE(trained() && still_training, "task 0 never reached its first checkpoint, or ended");
  BOOST_TEST(owner_of(run0) == json({{"job_name", job_name}, {"task", 0}, {"job_id", "9001"}}));
  BOOST_TEST(running.exit_code == 2, running.err);
  BOOST_TEST(running.err.find("run seed=1: skipped, Slurm job 9001 (RUNNING)") != std::string::npos,
             running.err);
  BOOST_TEST(running.err.find("in use") == std::string::npos, running.err);
  BOOST_TEST(read_all(squeue.log).find("--jobs=9001 --format=%T") != std::string::npos, read_all(squeue.log));

  // The job ended (Slurm forgot it, or lists it as CANCELLED): the owner is stale and the run goes into the
  // new script, which owns it from then on; task 1 (still queued, asked by name) stays out.
  for (const auto& [answer, code] :
       {std::pair<std::string, int>{"CANCELLED\n", 0},
        std::pair<std::string, int>{"slurm_load_jobs error: Invalid job id specified\n", 1}}) {
    write(run0 + "/.attograd-slurm-job",
          json({{"job_name", job_name}, {"task", 0}, {"job_id", "9001"}}).dump() + "\n");
    squeue.says(answer, code, "1 PENDING\n", 0);
    const auto stale = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch");
    BOOST_REQUIRE_MESSAGE(stale.exit_code == 0, answer << ": " << stale.err);
    const std::string script2 = read_all(folder + "/s2.sbatch");
    BOOST_TEST(sbatch_value(script2, "array") == "0-0", answer << ": " << script2);
    BOOST_TEST(script2.find("train --resume runs/s/seed=1 ") != std::string::npos, answer << ": " << script2);
    BOOST_TEST(owner_of(run0) ==
               json({{"job_name", sbatch_value(script2, "job-name")}, {"task", 0}, {"job_id", ""}}));
    BOOST_TEST(owner_of(folder + "/runs/s/seed=2")["job_name"] == job_name, "task 1's run changed hands");
  }

  // squeue that cannot answer: one line naming the owner file, exit 2, nothing written.
  write(run0 + "/.attograd-slurm-job", json({{"job_name", job_name}, {"task", 0}, {"job_id", ""}}).dump());
  squeue.says("", 0, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", 1);
  fs::remove(folder + "/s2.sbatch");
  const auto down = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch");
  BOOST_TEST(down.exit_code == 2, down.err);
  BOOST_TEST(count_lines(down.err) == 1, down.err);
  BOOST_TEST(down.err.find("runs/s/seed=1/.attograd-slurm-job: the run is owned by task 0 of Slurm array") !=
                 std::string::npos,
             down.err);
  BOOST_TEST(down.err.find("Unable to contact slurm controller") != std::string::npos, down.err);
  BOOST_TEST(!fs::exists(folder + "/s2.sbatch"));

  // An owner file that is not one: one line naming it and the field.
  write(run0 + "/.attograd-slurm-job", R"({"job_name": "x", "task": 0, "job_id": "9; rm -rf /"})");
  const auto forged = run_in(folder, squeue.env(), "sweep s.json --slurm s2.sbatch");
  BOOST_TEST(forged.exit_code == 2, forged.err);
  BOOST_TEST(forged.err.find(".attograd-slurm-job: /job_id: expected a Slurm job id") != std::string::npos,
             forged.err);

  // The local sweep leaves a run with a live owner to its job too.
  write(run0 + "/.attograd-slurm-job",
        json({{"job_name", job_name}, {"task", 0}, {"job_id", "9001"}}).dump());
  write(folder + "/runs/s/seed=2/.attograd-slurm-job",
        json({{"job_name", job_name}, {"task", 1}, {"job_id", "9002"}}).dump());
  squeue.says("RUNNING\n", 0, "", 0);
  const auto local = run_in(folder, squeue.env(), "sweep s.json -j 1");
  BOOST_TEST(local.exit_code == 0, local.err);
  BOOST_TEST(local.out.find("2 runs (0 finished already, 2 owned by Slurm tasks)") != std::string::npos,
             local.out);
  BOOST_TEST(local.err.find("run seed=2: skipped, Slurm job 9002 (RUNNING)") != std::string::npos, local.err);
}
