#include "cli/slurm_jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "io/printable.h"

namespace cli {
namespace {

// The job states in which Slurm still holds the job (squeue's long names): anything else has ended.
bool is_live(const std::string& state) {
  static const std::set<std::string> live = {
      "PENDING",     "RUNNING",  "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED",     "REQUEUE_HOLD",
      "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT",  "STOPPED",     "RESV_DEL_HOLD"};
  return live.count(state) > 0;
}

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr together
};

// Runs `args` (args[0] looked up on PATH) with its output captured; at most `seconds`.
Output run_captured(const std::vector<std::string>& args, int seconds) {
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
  Output out;
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
  Output out;
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

}  // namespace cli
