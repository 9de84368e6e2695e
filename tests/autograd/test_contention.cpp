// The pool (autograd/threads.cpp): each thread claims its own run of a job's chunks first and then takes
// what is left of the others', so every chunk runs once, with the same bounds, even when one thread is
// slow. While other processes use the cores, idle workers sleep instead of spinning and small jobs run
// on the caller. Either way every index runs once, nested jobs finish, and results keep their bits; and
// the measurement (autograd/cpu_contention.h) sees a spinning process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "autograd/cpu_contention.h"
#include "autograd/gemm.h"
#include "autograd/random.h"
#include "autograd/threads.h"

namespace {

// Sets a thread count and a contention mode for one test case, and restores the defaults after it.
struct PoolSetting {
  PoolSetting(int threads, ag::detail::Contention mode) {
    ag::set_num_threads(threads);
    ag::detail::set_contention(mode);
  }
  ~PoolSetting() {
    ag::detail::set_contention(ag::detail::Contention::kMeasured);
    ag::set_num_threads(1);
  }
};

std::vector<float> product(int64_t m, int64_t n, int64_t k) {
  ag::Rng rng(7);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& x : a) x = float(rng.normal());
  for (float& x : b) x = float(rng.normal());
  ag::gemm(m, n, k, ag::row_major(a.data(), k), ag::row_major(b.data(), n), c.data(), n, false);
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_chunk_runs_once_with_fixed_bounds_when_one_thread_is_slow) {
  for (int threads : {2, 3, 4}) {
    const PoolSetting setting(threads, ag::detail::Contention::kQuiet);
    for (int64_t n : {2, 3, 5, 8, 13, 16, 17, 100}) {
      // Which thread runs a chunk varies from run to run; the chunks' bounds may not. A slow first chunk
      // (the caller's, or a worker's) leaves its owner's other chunks for the rest to take.
      for (int64_t slow_begin : {int64_t(0), n - 1}) {
        std::mutex mutex;
        std::set<std::pair<int64_t, int64_t>> chunks;
        std::vector<std::atomic<int>> hits(n);
        ag::parallel_for(n, int64_t(1) << 30, [&](int64_t b, int64_t e) {
          if (b <= slow_begin && slow_begin < e) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
          const std::lock_guard<std::mutex> lock(mutex);
          chunks.insert({b, e});
        });
        for (int64_t i = 0; i < n; ++i)
          BOOST_REQUIRE_MESSAGE(hits[i].load() == 1, "threads " << threads << " n " << n << " index " << i);
        const int64_t parts = std::min<int64_t>(n, 4 * threads);
        BOOST_REQUIRE_EQUAL(chunks.size(), size_t(parts));
        int64_t c = 0;
        for (const auto& chunk : chunks) {
          BOOST_CHECK_EQUAL(chunk.first, n * c / parts);
          BOOST_CHECK_EQUAL(chunk.second, n * (c + 1) / parts);
          ++c;
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_contended_pool_runs_every_index_once_including_nested_jobs) {
  const PoolSetting setting(2, ag::detail::Contention::kBusy);
  // Work below and above the size that still goes to the workers while the cores are contended; each
  // chunk starts a nested job (which runs serially inside a pool job, and on the pool when the outer
  // job ran on the caller alone: it must not wait for the lock the caller's own job holds).
  for (int64_t work : {ag::kParallelMinWork, int64_t(1) << 30}) {
    std::vector<std::atomic<int>> hits(64 * 8);
    ag::parallel_for(64, work, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        ag::parallel_for(8, int64_t(1) << 30, [&](int64_t b2, int64_t e2) {
          for (int64_t j = b2; j < e2; ++j) hits[i * 8 + j].fetch_add(1);
        });
    });
    for (size_t i = 0; i < hits.size(); ++i) BOOST_REQUIRE_MESSAGE(hits[i].load() == 1, "index " << i);
  }
}

BOOST_AUTO_TEST_CASE(a_contended_pool_computes_the_same_bits_as_one_thread) {
  // 256 x 256 x 256 is above the contended threshold (2^24 flops is about 200^3 x 2) and 64^3 below it.
  std::vector<std::vector<float>> one, busy, quiet;
  for (auto [threads, mode, out] : {std::tuple{1, ag::detail::Contention::kQuiet, &one},
                                    std::tuple{2, ag::detail::Contention::kBusy, &busy},
                                    std::tuple{2, ag::detail::Contention::kQuiet, &quiet}}) {
    const PoolSetting setting(threads, mode);
    for (int64_t size : {64, 256, 300}) out->push_back(product(size, size + 3, size + 5));
  }
  BOOST_REQUIRE_EQUAL(one.size(), 3u);
  for (size_t i = 0; i < one.size(); ++i) {
    BOOST_TEST(one[i] == busy[i]);
    BOOST_TEST(one[i] == quiet[i]);
  }
}

BOOST_AUTO_TEST_CASE(a_spinning_process_is_seen_as_contention) {
  const pid_t child = fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;  // a neighbour that keeps one core busy until killed
  }
  // Every sample covers at least kInterval; allow a few in case the first ones straddle the fork.
  ag::detail::CpuContention contention;
  bool seen = false;
  for (int i = 0; i < 10 && !seen; ++i) {
    seen = contention.contended(std::chrono::steady_clock::now());
    std::this_thread::sleep_for(ag::detail::CpuContention::kInterval + std::chrono::milliseconds(20));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  BOOST_TEST(seen);
}
