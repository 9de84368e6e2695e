// Whether other processes are using this machine's cores, for the thread pool (threads.cpp) to decide
// whether its idle workers may spin. Read from the system's CPU time counters (Linux /proc/stat) minus
// this process's own CPU time; on systems without /proc/stat the cores count as never contended.
#pragma once

#include <chrono>
#include <cstdint>

namespace ag {

// CPU time used so far, in seconds: by all processes on all cores (Linux /proc/stat, less idle, iowait
// and steal) and by this process. False where the system does not say (no /proc/stat). `attograd bench`
// reports the difference over its timed steps, so that a figure taken on a busy machine says so.
bool cpu_seconds(double& all_processes, double& this_process);

namespace detail {

class CpuContention {
 public:
  // At least this much CPU time of other processes, in cores, over a sampling interval counts as
  // contention: a single busy process reads 1.0, background daemons on a quiet machine about 0.01.
  static constexpr double kOtherCores = 0.5;
  // How often the counters are read (each read costs some tens of microseconds).
  static constexpr std::chrono::milliseconds kInterval{100};

  // True if the last sampling interval saw contention. Samples again when kInterval has passed since the
  // last sample; not thread-safe (the pool calls it under its lock).
  bool contended(std::chrono::steady_clock::time_point now);

 private:
  bool unavailable_ = false;  // no /proc/stat: never contended
  bool have_sample_ = false;
  std::chrono::steady_clock::time_point last_{};
  double last_busy_s_ = 0;  // all processes' CPU time, seconds (from /proc/stat)
  double last_own_s_ = 0;   // this process's CPU time, seconds
  bool contended_ = false;
};

}  // namespace detail
}  // namespace ag
