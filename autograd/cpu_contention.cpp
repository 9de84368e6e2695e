#include "autograd/cpu_contention.h"

#include <cstdio>

#if defined(__linux__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace ag {

namespace {

#if defined(__linux__)
// CPU time spent by all processes on all cores, in seconds: the first line of /proc/stat, in clock ticks:
// user, nice, system, idle, iowait, irq, softirq, steal, ... Busy is everything but idle and iowait; steal
// (another virtual machine's use of the host) is left out too, since spinning does not compete with it.
bool read_busy_seconds(double& seconds) {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  const int read = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle,
                               &iowait, &irq, &softirq);
  std::fclose(f);
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (read != 7 || ticks_per_second <= 0) return false;
  seconds = double(user + nice + system + irq + softirq) / double(ticks_per_second);
  return true;
}

double own_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}
#else
bool read_busy_seconds(double&) {
  return false;
}
double own_seconds() {
  return 0;
}
#endif

}  // namespace

bool cpu_seconds(double& all_processes, double& this_process) {
  if (!read_busy_seconds(all_processes)) return false;
  this_process = own_seconds();
  return true;
}

namespace detail {

bool CpuContention::contended(std::chrono::steady_clock::time_point now) {
  if (unavailable_ || (have_sample_ && now - last_ < kInterval)) return contended_;
  double busy = 0, own = 0;
  if (!cpu_seconds(busy, own)) {
    unavailable_ = true;
    return contended_ = false;
  }
  // After a long gap (the pool was idle) the average over it says little about now: restart from here.
  if (have_sample_ && now - last_ <= 10 * kInterval) {
    const double elapsed_s = std::chrono::duration<double>(now - last_).count();
    contended_ = (busy - last_busy_s_) - (own - last_own_s_) >= kOtherCores * elapsed_s;
  }
  have_sample_ = true;
  last_ = now;
  last_busy_s_ = busy;
  last_own_s_ = own;
  return contended_;
}

}  // namespace detail
}  // namespace ag
