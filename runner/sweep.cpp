#include "runner/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "runner/run_state.h"
#include "runner/slurm_jobs.h"
#include "runner/sweep_collect.h"
#include "train/sweep.h"

namespace runner {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// The attograd program for the children and the printed commands.
std::string program_path(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return !ec && self.filename() == "attograd" ? self.string() : std::string("attograd");
}

// The state of a sweep's run, with the checks that the folder is this run's: a folder holding another
// config, or one being written by another process, stops the sweep before anything starts.
findings::RunState sweep_run_state(const train::SweepRun& run) {
  const std::string& dir = run.config.output.dir;
  findings::RunState s = run_state(dir);
  if (s.state == "busy")
    throw std::runtime_error(dir + ": in use by another attograd process (pid " + s.holder_pid +
                             "); wait for it to end, or use another folder");
  const std::string path = io::layout::config_json(dir);
  if (s.state != "owned" && fs::exists(path)) {
    const train::Config held = train::from_json(io::parse_json_text(io::read_text_file(path), path), path);
    if (!train::same_run_config(held, run.config))
      throw analysis::RequestError(dir + ": holds a run with a different config (" + path +
                                   "); remove it, or give the sweep another \"out\"");
  }
  return s;
}

std::vector<std::string> train_args(const train::SweepRun& run, const train::Sweep& sweep,
                                    const std::string& state, int threads) {
  std::vector<std::string> args = {"train"};
  if (state == "partial") {
    args.insert(args.end(), {"--resume", run.config.output.dir});
  } else {
    args.push_back(sweep.base);
    for (const std::string& o : run.overrides) args.insert(args.end(), {"--set", o});
    args.insert(args.end(), {"--out", run.config.output.dir});
  }
  args.insert(args.end(), {"--set", "train.threads=" + std::to_string(threads)});
  return args;
}

std::string command_line(const std::string& program, const std::vector<std::string>& args) {
  std::string line = shell_quote(program);
  for (const std::string& a : args) line += " " + shell_quote(a);
  return line;
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
  // Everything the child needs, built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
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
    if (program.find('/') == std::string::npos)
      execvp(program.c_str(), argv.data());
    else
      execv(program.c_str(), argv.data());
    std::fprintf(stderr, "attograd sweep: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(fd);
  return pid;
}

struct Child {
  size_t run;
  clock_type::time_point start;
};

}  // namespace

namespace {

// The request's fields, checked before the sweep file is read.
void check_sweep_request(const SweepRequest& request) {
  if (request.file.empty()) throw analysis::RequestError("file: the sweep file is required");
  if (request.jobs < 0)
    throw analysis::RequestError("jobs: expected a positive number, got " + std::to_string(request.jobs));
  if (request.cpus_per_task < 0)
    throw analysis::RequestError("cpus_per_task: expected a positive number, got " +
                                 std::to_string(request.cpus_per_task));
  if (request.cpus_per_task > 0 && request.slurm.empty())
    throw analysis::RequestError("cpus_per_task: only with slurm (the Slurm script's --cpus-per-task)");
}

// Each run's outcome so far in result.runs (owned by a Slurm task, finished before, or to do; a stale
// owner file removed); returns the indices of the runs to do.
std::vector<size_t> plan_runs(const train::Sweep& sweep, const std::vector<findings::RunState>& states,
                              findings::SweepResult& result, SweepObserver& report) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const std::string& dir = sweep.runs[i].config.output.dir;
    findings::SweepRunOutcome o;
    o.name = sweep.runs[i].name;
    o.dir = dir;
    o.state = states[i].state;
    o.owner = states[i].owner;
    if (states[i].stale_owner) io::remove_slurm_owner(dir);
    if (o.state == "owned") {
      o.outcome = "owned";
      ++result.owned;
      report.on_owned(o);
    } else if (o.state == "finished") {
      o.outcome = "skipped";
      ++result.finished_before;
    } else {
      o.outcome = result.mode == "run" ? "not started" : "planned";
      todo.push_back(i);
    }
    result.runs.push_back(std::move(o));
  }
  return todo;
}

// The runs to do as one Slurm array: its script written to request.slurm, each run's folder marked as the
// array's.
void submit_slurm_array(const SweepRequest& request, const train::Sweep& sweep,
                        const std::vector<findings::RunState>& states, const std::vector<size_t>& todo,
                        const std::string& program, analysis::Output<findings::SweepResult>& output) {
  findings::SweepResult& result = output.result;
  if (todo.empty())
    throw analysis::RequestError(
        "slurm " + request.slurm + ": no run to submit: " +
        (result.owned
             ? std::to_string(result.owned) + " owned by queued or running Slurm tasks, the others finished"
             : std::string("every run of the sweep is finished")));
  // One array, so one --cpus-per-task: the runs' train.threads (a grid never sets it), or the request's.
  int cpus = request.cpus_per_task;
  if (cpus == 0)
    for (size_t i : todo) cpus = std::max(cpus, sweep.runs[i].config.train.threads);
  const std::string job_name = new_slurm_job_name();
  std::vector<SlurmTask> tasks;
  for (size_t i : todo)
    tasks.push_back({sweep.runs[i].config.output.dir,
                     command_line(program, train_args(sweep.runs[i], sweep, states[i].state, cpus))});
  const std::string script = slurm_script(sweep.source, sweep.out, tasks, job_name, cpus);
  // Each run is the array's from now on, queued until its task starts (the task then writes its job id).
  for (size_t t = 0; t < todo.size(); ++t) {
    const std::string& dir = sweep.runs[todo[t]].config.output.dir;
    io::mark_run_folder(dir);
    io::write_slurm_owner(dir, io::SlurmOwner{job_name, static_cast<int64_t>(t), ""});
  }
  io::write_user_file(request.slurm, script);
  result.slurm_script = request.slurm;
  result.slurm_job_name = job_name;
  result.cpus_per_task = cpus;
  output.wrote.push_back(request.slurm);
}

// The runs to do, `jobs` train processes at a time of `threads` threads each, until all have ended or a
// stop signal ends them (the first at a checkpoint, a second at once); their outcomes in result.runs.
void run_children(const train::Sweep& sweep, const std::vector<findings::RunState>& states,
                  const std::vector<size_t>& todo, const std::string& program, int jobs, int threads,
                  findings::SweepResult& result, SweepObserver& report,
                  const std::atomic<int>* stop_signals) {
  std::map<pid_t, Child> running;
  size_t next = 0;
  SweepProgress progress;
  progress.total = result.total;
  progress.done = result.finished_before;
  double finished_seconds = 0;
  int64_t finished_here = 0;
  int forwarded = 0;
  const auto stops = [&] { return stop_signals ? stop_signals->load() : 0; };
  const auto update = [&](bool changed) {
    progress.running = static_cast<int64_t>(running.size());
    progress.left = static_cast<int64_t>(todo.size() - next);
    progress.failed = result.failed;
    progress.interrupted = result.interrupted;
    progress.eta_seconds.reset();
    if (finished_here > 0) {
      const double per_run = finished_seconds / static_cast<double>(finished_here);
      double remaining = per_run * static_cast<double>(progress.left);
      for (const auto& [pid, c] : running)
        remaining +=
            std::max(0.0, per_run - std::chrono::duration<double>(clock_type::now() - c.start).count());
      progress.eta_seconds = remaining / jobs;
    }
    report.on_progress(progress, changed);
  };

  while (next < todo.size() || !running.empty()) {
    // The first stop asks every run to stop at a checkpoint; a second one (as for `train`) ends them at
    // once, keeping their last checkpoint.
    if (const int signals = stops(); signals > forwarded) {
      for (const auto& [pid, c] : running) kill(pid, SIGINT);
      report.on_stopping(forwarded == 0);
      forwarded = signals;
    }
    while (stops() == 0 && running.size() < static_cast<size_t>(jobs) && next < todo.size()) {
      const size_t i = todo[next++];
      const train::SweepRun& run = sweep.runs[i];
      running[launch(program, train_args(run, sweep, states[i].state, threads), run.config.output.dir)] =
          Child{i, clock_type::now()};
      update(true);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const Child c = running[pid];
      running.erase(pid);
      findings::SweepRunOutcome& o = result.runs[c.run];
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      const bool stopped = code == 130 || (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
      if (code == 0) {
        o.outcome = "finished";
        ++result.finished;
        ++progress.done;
        ++finished_here;
        finished_seconds += std::chrono::duration<double>(clock_type::now() - c.start).count();
      } else if (stopped) {
        o.outcome = "interrupted";
        ++result.interrupted;
      } else {
        o.outcome = "failed";
        o.exit_code = code;
        ++result.failed;
        const std::string log = io::layout::train_log(o.dir);
        o.problem = last_line(log);
        report.on_failed(o, log);
      }
      update(true);
    } else if (pid < 0 && errno == ECHILD) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      update(false);
    }
  }
  result.stopped = stops() > 0;
}

}  // namespace

analysis::Output<findings::SweepResult> sweep(const SweepRequest& request, SweepObserver* observer,
                                              const std::atomic<int>* stop_signals) {
  SweepObserver quiet;
  SweepObserver& report = observer ? *observer : quiet;
  check_sweep_request(request);
  const train::Sweep sweep = train::load_sweep(request.file);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int jobs = request.jobs > 0 ? request.jobs : std::max(1, cores / 2);
  const int threads = std::max(1, cores / jobs);

  analysis::Output<findings::SweepResult> output;
  findings::SweepResult& result = output.result;
  result.sweep = request.file;
  result.out = sweep.out;
  result.mode = !request.slurm.empty() ? "slurm" : request.print_commands ? "commands" : "run";
  result.total = static_cast<int64_t>(sweep.runs.size());

  // Every run's folder is checked before anything is written or started. A run that a queued or running
  // Slurm array task owns is left to it (squeue says which); a stale owner file goes below.
  std::vector<findings::RunState> states;
  for (const train::SweepRun& run : sweep.runs) states.push_back(sweep_run_state(run));
  const std::string program = program_path(request.program);

  const io::FolderLock lock(sweep.out);  // one sweep per folder; each run's train locks its own
  io::write_text_file_atomically(io::layout::sweep_manifest(sweep.out),
                                 train::sweep_manifest(sweep).dump(2) + "\n");

  const std::vector<size_t> todo = plan_runs(sweep, states, result, report);
  if (result.mode == "slurm") {
    submit_slurm_array(request, sweep, states, todo, program, output);
    return output;
  }
  if (result.mode == "commands") {
    for (size_t i : todo)
      result.commands.push_back(
          command_line(program, train_args(sweep.runs[i], sweep, states[i].state, threads)));
    return output;
  }

  result.jobs = jobs;
  result.threads = threads;
  report.on_start(result);
  run_children(sweep, states, todo, program, jobs, threads, result, report, stop_signals);

  const findings::SweepSummary summary = collect_sweep(sweep.out);
  write_sweep_summary(sweep.out, summary);
  output.wrote = {io::layout::summary_json(sweep.out), io::layout::summary_csv(sweep.out),
                  io::layout::sweep_index_html(sweep.out)};
  return output;
}

analysis::Output<findings::SweepSummary> sweep_collect(const std::string& out) {
  if (out.empty()) throw analysis::RequestError("out: the sweep's out folder is required");
  const io::FolderLock lock(out);  // one writer of the summary (and not while the sweep runs)
  analysis::Output<findings::SweepSummary> output;
  output.result = collect_sweep(out);
  write_sweep_summary(out, output.result);
  output.wrote = {io::layout::summary_json(out), io::layout::summary_csv(out),
                  io::layout::sweep_index_html(out)};
  return output;
}

}  // namespace runner
