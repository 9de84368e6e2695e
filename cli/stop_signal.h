// Ctrl-C (SIGINT) and SIGTERM for a command that trains: while a StopOnSignal lives, the first signal sets
// its flag (the loop checkpoints at the current step and returns), and a second one, for a person who does
// not want to wait, ends the process at once with 130: the last checkpoint on disk is complete either way.
// The handlers are restored to the default when it goes out of scope.
#pragma once

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace cli {

class StopOnSignal {
 public:
  StopOnSignal() {
    flag().store(false);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  ~StopOnSignal() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  const std::atomic<bool>* stop() const { return &flag(); }
  bool requested() const { return flag().load(); }

 private:
  static std::atomic<bool>& flag() {
    static std::atomic<bool> f{false};
    return f;
  }
  static void on_signal(int) {
    if (flag().exchange(true)) ::_exit(130);
  }
};

}  // namespace cli
