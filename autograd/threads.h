// The engine's worker threads: one persistent pool of our own, used by the ops' parallel loops and by the
// GEMMs that are large enough to split (OpenMP is not used at all: Eigen's OpenMP GEMM threading, tried
// first, spent more time waking and spin-waiting threads than multiplying on these small products).
//
// Determinism: parallel_for splits [0, n) into contiguous chunks by a fixed rule (min(n, 4 x threads)
// chunks of equal size, give or take one), so for a fixed thread count every element is computed by the
// same code on the same data in the same order, whichever thread happens to run its chunk. Each thread
// runs its own share of the chunks when it can (threads.cpp), so consecutive ops over the same rows find
// them in the same core's cache.
// Row-wise kernels (one row per task) and the GEMMs (gemm.h) give the same bits for every thread count.
//
// Idle workers spin for up to 200 microseconds, then sleep on a condition variable; while other processes
// keep the cores busy they do not spin at all, and small jobs run on the calling thread alone (see
// threads.cpp): a pool of spinning threads on a shared machine is slower than one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ag {

// Sets the thread count (values below 1 mean 1) and starts the pool's workers. If a worker cannot be
// started, the ones already started are joined, the count stays as it was, and std::runtime_error is
// thrown ("thread pool: could not start worker thread k of n ...") for the caller to name its setting.
void set_num_threads(int n);
int num_threads();

// Below this much work (roughly, floating-point operations) a parallel_for runs serially: waking the pool
// costs a few microseconds.
constexpr int64_t kParallelMinWork = int64_t(1) << 16;

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
void run_parallel(int64_t n, int64_t work, ChunkFn fn, void* ctx);
bool in_parallel_region();
// For tests: called with the worker's index (1 .. threads - 1) before each worker thread is started; a
// hook that throws stands in for a thread the system refuses to create. nullptr removes it.
using WorkerStartHook = void (*)(int index);
void set_worker_start_hook(WorkerStartHook hook);
// For tests: whether the pool treats the cores as used by other processes (kMeasured: as measured, see
// cpu_contention.h), so both ways of running a job can be tested on any machine.
enum class Contention { kMeasured, kQuiet, kBusy };
void set_contention(Contention mode);
// run_parallel for a callable f(begin, end).
template <typename F>
void run_parallel_fn(int64_t n, int64_t work, F& f) {
  run_parallel(
      n, work, [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}
}  // namespace detail

// Calls f(begin, end) on disjoint contiguous chunks covering [0, n), spread over the threads, when `work`
// (the total cost, e.g. flops or elements) is at least kParallelMinWork and more than one thread is set;
// otherwise f(0, n) on the calling thread. Nested calls run serially. f must not throw.
template <typename F>
void parallel_for(int64_t n, int64_t work, F&& f) {
  if (n <= 0) return;
  if (n == 1 || work < kParallelMinWork || num_threads() < 2 || detail::in_parallel_region()) {
    f(int64_t(0), n);
    return;
  }
  detail::run_parallel_fn(n, work, f);
}

// Calls f(begin, end) on chunks of [0, n) for n large independent tasks (the shards of a batch,
// train/batch_shards.h), one chunk per thread and more where n is larger, whatever their size. While other
// processes keep the cores busy (cpu_contention.h) it calls f(0, n) on the calling thread instead, outside
// any parallel region, so each task's own parallel_for calls may still split: a worker sharing its core
// with another process would finish its task late, with the caller waiting for it.
template <typename F>
void parallel_tasks(int64_t n, F&& f) {
  if (n <= 0) return;
  if (n == 1 || num_threads() < 2 || detail::in_parallel_region()) {
    f(int64_t(0), n);
    return;
  }
  detail::run_parallel_fn(n, /*work=*/0, f);
}

// Calls f(begin, length) on consecutive chunks of `chunk` elements (the last one shorter) covering
// [0, size), spread over the threads when size x work_per_element is large enough (see parallel_for).
// For elementwise work, where any split gives the same results.
template <typename F>
void parallel_chunks(int64_t size, int64_t chunk, int64_t work_per_element, F&& f) {
  parallel_for((size + chunk - 1) / chunk, work_per_element * size, [&](int64_t c0, int64_t c1) {
    for (int64_t i = c0 * chunk; i < std::min(size, c1 * chunk); i += chunk) f(i, std::min(chunk, size - i));
  });
}

}  // namespace ag
