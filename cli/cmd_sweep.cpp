// attograd sweep SWEEP.json [-j N] [--print-commands] [--slurm FILE [--cpus-per-task N]]
// attograd sweep collect DIR
// Runs every point of a sweep's grid as a child process of this program (`attograd train BASE --set ...
// --out OUT/NAME`), N at a time, skipping finished runs and resuming interrupted ones; Ctrl-C stops every
// child at a checkpoint. Or prints the commands for another scheduler (or a Slurm job array), and
// collects the summary after. A run that a queued or running Slurm array task owns is left to it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/slurm_jobs.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/sweep_collect.h"
#include "train/checkpoint.h"
#include "train/sweep.h"

namespace cli {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// Stop signals received (Ctrl-C, SIGTERM); each is passed on to the running children once.
std::atomic<int> g_stop{0};
extern "C" void on_stop_signal(int) {
  g_stop.fetch_add(1);
}

struct SweepArgs {
  std::string file;
  int jobs = 0;  // 0: one run per two cores
  bool print_commands = false;
  std::string slurm;
  int cpus_per_task = 0;  // 0: the runs' train.threads
  std::string collect_dir;
};

// What a run's folder holds now.
enum class RunState { fresh, resume, finished };

// `owned`: a live Slurm task trains the run, holding its lock; the folder is checked without it.
RunState run_state(const train::SweepRun& run, bool owned) {
  const std::string dir = run.config.output.dir;
  // A file, or a folder that is not a run, where a run goes; a planted link in a run: refused here, before
  // any run starts.
  if (io::check_new_run_folder(dir)) {
    if (owned)
      io::check_run_entries(dir);
    else
      const io::RunLock probe(dir);  // in use by another process: refused now, not as a failed run later
  }
  const std::string path = io::layout::config_json(dir);
  if (!fs::exists(path)) return RunState::fresh;
  const train::Config held = train::from_json(io::parse_json(io::read_text_file(path), path), path);
  if (!train::same_run_config(held, run.config))
    throw UsageError(dir + ": holds a run with a different config (" + path +
                     "); remove it, or give the sweep another \"out\"");
  if (!fs::exists(io::layout::model_checkpoint(dir))) return RunState::fresh;
  const std::string scores = io::layout::scores_json(dir);
  if (fs::exists(scores)) {
    const nlohmann::json j = io::parse_json(io::read_text_file(scores), scores);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() == run.config.train.steps)
      return RunState::finished;
  }
  return RunState::resume;
}

// The program's own path, for the children and the printed commands.
std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("attograd") : p.string();
}

std::vector<std::string> train_args(const train::SweepRun& run, const train::Sweep& sweep, RunState state,
                                    int threads) {
  std::vector<std::string> args = {"train"};
  if (state == RunState::resume) {
    args.insert(args.end(), {"--resume", run.config.output.dir});
  } else {
    args.push_back(sweep.base);
    for (const std::string& o : run.overrides) args.insert(args.end(), {"--set", o});
    args.insert(args.end(), {"--out", run.config.output.dir});
  }
  args.insert(args.end(), {"--set", "train.threads=" + std::to_string(threads)});
  return args;
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./=,:+-@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const std::string& program, const std::vector<std::string>& args) {
  std::string line = shell_quote(program);
  for (const std::string& a : args) line += " " + shell_quote(a);
  return line;
}

std::string duration(double seconds) {
  char buf[32];
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// The last non-empty line of a child's log, for a failure message.
std::string last_line(const std::string& path) {
  std::string text;
  try {
    text = io::read_text_file(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \r\t") != std::string::npos) last = line;
  // A progress line redrawn with '\r' keeps only its final state.
  const size_t cr = last.find_last_of('\r', last.size() > 1 ? last.size() - 2 : 0);
  return cr == std::string::npos ? last : last.substr(cr + 1);
}

struct Child {
  size_t run;
  clock_type::time_point start;
};

// Starts `attograd train` for the run in `run_dir`, its output appended to the run's train.log.
pid_t launch(const std::string& program, const std::vector<std::string>& args, const std::string& run_dir) {
  io::mark_run_folder(run_dir);  // the sweep creates the run: `train --out` then finds a run folder
  const std::string log = io::layout::train_log(run_dir);
  // O_NOFOLLOW and a regular file only: a planted link or FIFO is never written through.
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = fd < 0 ? std::strerror(errno) : "is " + io::file_kind(st.st_mode);
    if (fd >= 0) close(fd);
    throw std::runtime_error(log + ": cannot write the run's log: " + why);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    throw std::runtime_error(std::string("cannot start a run: fork failed (") + std::strerror(errno) + ")");
  }
  if (pid == 0) {
    // Its own process group: a Ctrl-C reaches the sweep only, which passes it on once to every child.
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    fcntl(fd, F_SETFL, O_APPEND);
    dup2(fd, STDOUT_FILENO);  // the copies do not inherit O_CLOEXEC
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    std::fprintf(stderr, "attograd sweep: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(fd);
  return pid;
}

int collect(const std::string& dir) {
  const io::FolderLock lock(dir);  // one writer of the summary (and not while the sweep runs)
  const findings::SweepSummary summary = study::collect_sweep(dir);
  study::write_sweep_summary(dir, summary);
  size_t finished = 0;
  for (const auto& r : summary.runs) {
    finished += r.status == "finished";
    if (r.status == "unreadable")
      std::fprintf(stderr, "run %s: unreadable, left out of the numbers: %s\n", r.name.c_str(),
                   io::printable(r.problem).c_str());
  }
  std::printf("%zu runs (%zu finished): %s, %s, %s\n", summary.runs.size(), finished,
              io::layout::summary_json(dir).c_str(), io::layout::summary_csv(dir).c_str(),
              io::layout::sweep_index_html(dir).c_str());
  return 0;
}

// `s` as one argument of an #SBATCH line: sbatch reads a quoted word with backslash escapes.
std::string sbatch_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A path for the generated script: absolute (the job may be submitted from any folder), one line of
// printable text, and without a backslash, which would turn off Slurm's %A and %a in the log's name.
std::string script_path(const std::string& path, const std::string& what) {
  const std::string abs = fs::absolute(path).lexically_normal().string();
  if (!io::is_printable_utf8(abs) || abs.find('\\') != std::string::npos)
    throw UsageError("--slurm: " + what + " " + io::printable(abs) +
                     ": expected a path without control bytes or backslashes (Slurm's #SBATCH lines)");
  return abs.size() > 1 && abs.back() == '/' ? abs.substr(0, abs.size() - 1) : abs;
}

// The array's job name: unique per generated script, so that a queued task is found by name and index.
std::string new_slurm_job_name() {
  std::random_device device;
  char buf[32];
  std::snprintf(buf, sizeof buf, "attograd-sweep-%08x", static_cast<unsigned>(device()));
  return buf;
}

struct SlurmTask {
  std::string run_dir;  // as the commands name it, relative to the generating folder or absolute
  std::string command;  // the `attograd train` line, quoted for the shell
};

// The job array: task i trains tasks[i]. Every path is absolute or relative to the folder the script was
// generated in, which is the job's --chdir; the task writes its run's owner file (with its job id) as it
// starts and removes it as it ends, so a script generated meanwhile skips the run.
std::string slurm_script(const train::Sweep& sweep, const std::vector<SlurmTask>& tasks,
                         const std::string& job_name, int cpus_per_task) {
  const std::string cwd = script_path(fs::current_path().string(), "the current folder");
  const std::string out = script_path(sweep.out, "\"out\"");
  // The log's name: %A and %a are Slurm's (array job, task); a % of the folder's own is written %%.
  const std::string pattern = io::layout::slurm_log_pattern(out);
  std::string log;
  for (size_t i = 0; i < pattern.size(); ++i)
    log += pattern[i] == '%' && i < out.size() ? "%%" : std::string(1, pattern[i]);
  std::string s = "#!/bin/bash\n# A Slurm job array for the sweep " + io::printable(sweep.source) +
                  ": one array task per run that is not finished\n# and not owned by a queued or running "
                  "task. Submit it from any folder: sbatch THIS_FILE; then: attograd sweep collect " +
                  shell_quote(out) + "\n";
  s += "#SBATCH --job-name=" + job_name + "\n#SBATCH --array=0-" + std::to_string(tasks.size() - 1) + "\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(cpus_per_task) + "\n";
  s += "#SBATCH --chdir=" + sbatch_quote(cwd) + "\n#SBATCH --output=" + sbatch_quote(log) + "\n";
  s +=
      "set -euo pipefail\ncd " + shell_quote(cwd) + "\ncase \"${SLURM_ARRAY_TASK_ID:?run with sbatch}\" in\n";
  for (size_t i = 0; i < tasks.size(); ++i)
    s += "  " + std::to_string(i) + ") run=" + shell_quote(tasks[i].run_dir) + "; run_task() { " +
         tasks[i].command + "; } ;;\n";
  s += "  *) echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n";
  // The task owns its run while it trains: the owner file (io::SlurmOwner's JSON, io/run_ownership.h)
  // names its job id, and goes when the task ends; a killed task's is found stale by that id.
  std::string owner = R"(owner="$run/FILE"
printf '{"job_name":"NAME","task":%d,"job_id":"%s"}\n' "$SLURM_ARRAY_TASK_ID" "$SLURM_JOB_ID" >"$owner.tmp.$$"
mv -f "$owner.tmp.$$" "$owner"
release() { if grep -qs "\"job_id\":\"$SLURM_JOB_ID\"" "$owner"; then rm -f "$owner"; fi; }
trap release EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
run_task
)";
  owner.replace(owner.find("FILE"), 4, fs::path(io::layout::slurm_owner("")).filename().string());
  owner.replace(owner.find("NAME"), 4, job_name);
  s += "# This task owns its run while it trains; the file goes when the task ends (a killed task's is\n"
       "# found stale by its job id).\n" +
       owner;
  return s;
}

int run_sweep(const SweepArgs& a) {
  if (!a.collect_dir.empty()) return collect(a.collect_dir);
  if (a.file.empty()) throw UsageError("sweep: SWEEP.json is required (or: sweep collect DIR)");
  const train::Sweep sweep = train::load_sweep(a.file);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1, cores / 2);
  const int threads = std::max(1, cores / jobs);

  // A run that a queued or running Slurm array task owns is left to it (squeue says which); the owner
  // file of a task that ended without removing it (killed) is stale, and goes below.
  std::vector<std::string> owners(sweep.runs.size());
  std::vector<bool> stale(sweep.runs.size(), false);
  size_t owned = 0;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const std::string& dir = sweep.runs[i].config.output.dir;
    const std::optional<io::SlurmOwner> owner = io::read_slurm_owner(dir);
    if (!owner) continue;
    const std::string state = live_slurm_state(*owner, io::layout::slurm_owner(dir));
    stale[i] = state.empty();
    if (stale[i]) continue;
    ++owned;
    owners[i] = (owner->job_id.empty() ? "array " + owner->job_name + " task " + std::to_string(owner->task)
                                       : "job " + owner->job_id) +
                " (" + state + ")";
  }

  // Every run's folder is checked before anything is written or started.
  std::vector<RunState> states;
  for (size_t i = 0; i < sweep.runs.size(); ++i)
    states.push_back(run_state(sweep.runs[i], !owners[i].empty()));
  const std::string program = self_path();

  const io::FolderLock lock(sweep.out);  // one sweep per folder; each run's train locks its own
  io::write_text_file_atomically(io::layout::sweep_manifest(sweep.out),
                                 train::sweep_manifest(sweep).dump(2) + "\n");

  std::vector<size_t> todo;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    if (stale[i]) io::remove_slurm_owner(sweep.runs[i].config.output.dir);
    if (!owners[i].empty())
      std::fprintf(stderr, "run %s: skipped, Slurm %s\n", sweep.runs[i].name.c_str(), owners[i].c_str());
    else if (states[i] != RunState::finished)
      todo.push_back(i);
  }

  if (!a.slurm.empty()) {
    if (todo.empty())
      throw UsageError(
          "--slurm " + a.slurm + ": no run to submit: " +
          (owned ? std::to_string(owned) + " owned by queued or running Slurm tasks, the others finished"
                 : std::string("every run of the sweep is finished")));
    // One array, so one --cpus-per-task: the runs' train.threads (a grid never sets it), or the flag's.
    int cpus = a.cpus_per_task;
    if (cpus == 0)
      for (size_t i : todo) cpus = std::max(cpus, sweep.runs[i].config.train.threads);
    const std::string job_name = new_slurm_job_name();
    std::vector<SlurmTask> tasks;
    for (size_t i : todo)
      tasks.push_back({sweep.runs[i].config.output.dir,
                       command_line(program, train_args(sweep.runs[i], sweep, states[i], cpus))});
    const std::string script = slurm_script(sweep, tasks, job_name, cpus);
    // Each run is the array's from now on, queued until its task starts (the task then writes its job id).
    for (size_t t = 0; t < todo.size(); ++t) {
      const std::string& dir = sweep.runs[todo[t]].config.output.dir;
      io::mark_run_folder(dir);
      io::write_slurm_owner(dir, io::SlurmOwner{job_name, static_cast<int64_t>(t), ""});
    }
    io::write_user_file(a.slurm, script);
    std::fprintf(stderr,
                 "wrote %s: %zu array tasks, %d cpus each; sbatch %s, then attograd sweep collect %s\n",
                 a.slurm.c_str(), todo.size(), cpus, a.slurm.c_str(), sweep.out.c_str());
    return 0;
  }
  if (a.print_commands) {
    for (size_t i : todo)
      std::printf("%s\n",
                  command_line(program, train_args(sweep.runs[i], sweep, states[i], threads)).c_str());
    return 0;
  }

  const size_t total = sweep.runs.size(), skipped = total - todo.size() - owned;
  std::printf("sweep %s: %zu runs (%zu finished already%s), %d at a time with %d threads each, into %s\n",
              a.file.c_str(), total, skipped,
              owned ? (", " + std::to_string(owned) + " owned by Slurm tasks").c_str() : "", jobs, threads,
              sweep.out.c_str());
  std::fflush(stdout);

  g_stop.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  const bool tty = isatty(STDOUT_FILENO);
  std::map<pid_t, Child> running;
  size_t next = 0, done = skipped, failed = 0, interrupted = 0;
  double finished_seconds = 0;
  size_t finished_here = 0;
  int forwarded = 0;
  std::string last_drawn;
  auto last_draw = clock_type::now() - std::chrono::seconds(10);
  const auto draw = [&](bool force) {
    const size_t left = todo.size() - next;
    std::string eta = "ETA -";
    if (finished_here > 0) {
      const double per_run = finished_seconds / finished_here;
      double remaining = per_run * left;
      for (const auto& [pid, c] : running)
        remaining +=
            std::max(0.0, per_run - std::chrono::duration<double>(clock_type::now() - c.start).count());
      eta = "ETA " + duration(remaining / jobs);
    }
    char line[256];
    std::snprintf(line, sizeof line, "sweep: %zu/%zu done, %zu running, %zu left%s%s, %s", done, total,
                  running.size(), left, failed ? (", " + std::to_string(failed) + " failed").c_str() : "",
                  interrupted ? (", " + std::to_string(interrupted) + " interrupted").c_str() : "",
                  eta.c_str());
    const auto now = clock_type::now();
    if (tty) {
      if (!force && now - last_draw < std::chrono::seconds(1)) return;
      std::printf("\r\033[K%s", line);
    } else {
      // Without a terminal, a line per change of the counts (not of the ETA).
      const std::string counts(line, std::strstr(line, ", ETA") ? std::strstr(line, ", ETA") - line : 0);
      if (counts == last_drawn) return;
      last_drawn = counts;
      std::printf("%s\n", line);
    }
    last_draw = now;
    std::fflush(stdout);
  };

  while (next < todo.size() || !running.empty()) {
    // The first signal asks every run to stop at a checkpoint; a second one (as for `train`) ends them
    // at once, keeping their last checkpoint.
    if (const int signals = g_stop.load(); signals > forwarded) {
      for (const auto& [pid, c] : running) kill(pid, SIGINT);
      if (tty) std::printf("\n");
      std::printf(
          forwarded == 0
              ? "stopping: each running run saves a checkpoint; run the same command again to resume\n"
              : "stopping now: the runs keep their last checkpoints\n");
      forwarded = signals;
    }
    while (g_stop.load() == 0 && running.size() < static_cast<size_t>(jobs) && next < todo.size()) {
      const size_t i = todo[next++];
      const train::SweepRun& run = sweep.runs[i];
      running[launch(program, train_args(run, sweep, states[i], threads), run.config.output.dir)] =
          Child{i, clock_type::now()};
      draw(true);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const Child c = running[pid];
      running.erase(pid);
      const train::SweepRun& run = sweep.runs[c.run];
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      const bool stopped = code == 130 || (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
      if (code == 0) {
        ++done;
        ++finished_here;
        finished_seconds += std::chrono::duration<double>(clock_type::now() - c.start).count();
      } else if (stopped) {
        ++interrupted;
      } else {
        ++failed;
        if (tty) std::printf("\n");
        const std::string log = io::layout::train_log(run.config.output.dir);
        std::printf("run %s failed (exit %d): %s (log: %s)\n", run.name.c_str(), code, last_line(log).c_str(),
                    log.c_str());
      }
      draw(true);
    } else if (pid < 0 && errno == ECHILD) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      draw(false);
    }
  }
  if (tty) std::printf("\n");
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  const findings::SweepSummary summary = study::collect_sweep(sweep.out);
  study::write_sweep_summary(sweep.out, summary);
  std::printf("summary: %s, %s\n", io::layout::summary_csv(sweep.out).c_str(),
              io::layout::sweep_index_html(sweep.out).c_str());
  if (g_stop.load() > 0) {
    std::printf("interrupted: %zu of %zu runs finished; run the same command again to resume the rest\n",
                done, total);
    return 130;
  }
  if (failed) {
    std::printf("%zu of %zu runs failed; the others are in the summary\n", failed, total);
    return 1;
  }
  std::printf("done: %zu runs\n", total);
  return 0;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* sub = app.add_subcommand("sweep", "train every point of a grid of settings; summarise the runs");
  sub->footer(
      "SWEEP.json: {\"base\": \"configs/induction.json\", \"grid\": {\"seed\": [1, 2, 3]}, \"out\": "
      "\"runs/s\"}.\n"
      "Each grid value is checked like --set before anything starts. Each run is an ordinary run folder\n"
      "OUT/NAME; finished runs are skipped and interrupted ones resumed when the same command runs "
      "again.\n" +
      io::layout::summary_json("OUT") + ", " + io::layout::summary_csv("OUT") + " and " +
      io::layout::sweep_index_html("OUT") + " summarise the sweep (docs/sweeps.md).");
  sub->add_option("SWEEP", args->file, "sweep file, e.g. sweeps/induction-seeds.json");
  sub->add_option("-j,--jobs", args->jobs, "runs at a time (default: one per two cores)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--print-commands", args->print_commands,
                "print one `attograd train` command per unfinished run (for xargs, GNU parallel) and exit");
  CLI::Option* slurm = sub->add_option("--slurm", args->slurm,
                                       "write a Slurm job-array script for the unfinished runs to FILE");
  sub->add_option(
         "--cpus-per-task", args->cpus_per_task,
         "the script's --cpus-per-task and each run's train.threads (default: the runs' train.threads)")
      ->check(CLI::PositiveNumber)
      ->needs(slurm);
  CLI::App* collect = sub->add_subcommand(
      "collect", "build " + io::layout::summary_json("OUT") + ", " + io::layout::summary_csv("OUT") +
                     " and " + io::layout::sweep_index_html("OUT") + " from the run folders");
  collect->add_option("DIR", args->collect_dir, "the sweep's out folder")->required();
  return [args] { return run_sweep(*args); };
}

}  // namespace cli
