#include "runner/slurm_jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "analysis/tool.h"
#include "io/printable.h"
#include "io/run_layout.h"

namespace runner {
namespace {

// The job states in which Slurm still holds the job (squeue's long names): anything else has ended.
bool is_live(const std::string& state) {
  static const std::set<std::string> live = {
      "PENDING",     "RUNNING",  "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED",     "REQUEUE_HOLD",
      "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT",  "STOPPED",     "RESV_DEL_HOLD"};
  return live.count(state) > 0;
}

struct Captured {
  int exit_code = -1;
  std::string text;  // stdout and stderr together
};

// Runs `args` (args[0] looked up on PATH) with its output captured; at most `seconds`.
Captured run_captured(const std::vector<std::string>& args, int seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  Captured out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.text.size() < (size_t{1} << 20)) out.text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw std::runtime_error(args[0] + " took more than " + std::to_string(seconds) + " s");
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string first_line(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) return io::printable(line);
  return "(no output)";
}

}  // namespace

std::string live_slurm_state(const io::SlurmOwner& owner, const std::string& owner_file) {
  const bool started = !owner.job_id.empty();
  const std::string who = started
                              ? "Slurm job " + owner.job_id
                              : "task " + std::to_string(owner.task) + " of Slurm array " + owner.job_name;
  std::vector<std::string> args = {"squeue", "--noheader", "--states=all"};
  if (started)
    args.insert(args.end(), {"--jobs=" + owner.job_id, "--format=%T"});
  else
    args.insert(args.end(), {"--array", "--name=" + owner.job_name, "--format=%K %T"});
  Captured out;
  try {
    out = run_captured(args, 60);
  } catch (const std::runtime_error& e) {
    out.text = e.what();
  }
  if (out.exit_code != 0) {
    // A job Slurm has forgotten (it ended a while ago) is an error to squeue -j: it has ended.
    if (started && out.exit_code == 1 && out.text.find("Invalid job id") != std::string::npos) return "";
    throw std::runtime_error(owner_file + ": the run is owned by " + who +
                             ", and squeue cannot tell whether it still runs: " + first_line(out.text) +
                             " (remove the file if no job runs it)");
  }
  std::istringstream in(out.text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string index, state;
    if (started) {
      words >> state;
    } else {
      words >> index >> state;
      if (index != std::to_string(owner.task)) continue;
    }
    if (is_live(state)) return state;
  }
  return "";
}

}  // namespace runner

namespace runner {

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./=,:+-@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string new_slurm_job_name() {
  std::random_device device;
  char buf[32];
  std::snprintf(buf, sizeof buf, "attograd-sweep-%08x", static_cast<unsigned>(device()));
  return buf;
}

namespace {

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
  namespace fs = std::filesystem;
  const std::string abs = fs::absolute(path).lexically_normal().string();
  if (!io::is_printable_utf8(abs) || abs.find('\\') != std::string::npos)
    throw analysis::RequestError(
        "slurm: " + what + " " + io::printable(abs) +
        ": expected a path without control bytes or backslashes (Slurm's #SBATCH lines)");
  return abs.size() > 1 && abs.back() == '/' ? abs.substr(0, abs.size() - 1) : abs;
}

}  // namespace

std::string slurm_script(const std::string& source, const std::string& out_dir,
                         const std::vector<SlurmTask>& tasks, const std::string& job_name,
                         int cpus_per_task) {
  namespace fs = std::filesystem;
  const std::string cwd = script_path(fs::current_path().string(), "the current folder");
  const std::string out = script_path(out_dir, "\"out\"");
  // The log's name: %A and %a are Slurm's (array job, task); a % of the folder's own is written %%.
  const std::string pattern = io::layout::slurm_log_pattern(out);
  std::string log;
  for (size_t i = 0; i < pattern.size(); ++i)
    log += pattern[i] == '%' && i < out.size() ? "%%" : std::string(1, pattern[i]);
  std::string s = "#!/bin/bash\n# A Slurm job array for the sweep " + io::printable(source) +
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

}  // namespace runner
