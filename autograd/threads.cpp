// The worker pool behind parallel_for (see threads.h): num_threads() - 1 persistent workers plus the caller.
// A job is published by bumping a generation counter; the caller and the workers then claim its chunks
// one at a time until none is left, and the caller waits for the last to finish. Each thread owns an
// equal run of the chunks and claims its own first, then takes what is left of the others'. So on a quiet
// machine thread t runs the same share of [0, n) in every job: the rows an op writes stay in the cache of
// the core that reads them in the next op. A slow or descheduled thread's chunks are taken by the others.
// Which thread runs a chunk may vary; the chunks themselves (and so the results) depend only on n and the
// thread count. Idle threads spin briefly and then sleep, so a busy machine is not made busier.
#include "autograd/threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autograd/cpu_contention.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AG_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define AG_PAUSE() __asm__ __volatile__("yield")
#else
#define AG_PAUSE() ((void)0)
#endif

namespace ag {

namespace {

// How long an idle thread polls before it sleeps. Long enough to bridge the serial gaps between the ops
// of one training step (waking a sleeping thread costs tens of microseconds on a virtual machine, more
// than a shorter spin saves), short enough not to matter when the machine is shared.
constexpr auto kSpin = std::chrono::microseconds(200);

// While other processes use the cores (cpu_contention.h), a worker that spins between jobs uses up its
// share of a core shared with one of them and is then descheduled for a whole time slice, often holding
// a chunk the other threads wait for, so 2 threads run slower than 1. So while the cores are
// contended, idle workers sleep at once (and are woken
// per job), and jobs smaller than this much work, which a woken worker would reach too late to help
// with, run on the calling thread alone. Either way every kernel computes the same bits (threads.h).
// 2^26 flops is a few hundred microseconds on one core of AVX-512 width: a smaller threshold still hands
// tiny's fc1 products to a worker that shares its core with the other process.
constexpr int64_t kContendedMinWork = int64_t(1) << 26;

thread_local bool t_in_region = false;

std::atomic<detail::WorkerStartHook> g_worker_start_hook{nullptr};

// Polls ready() for up to kSpin (at all only if `spin`); returns its last answer.
template <typename Ready>
bool spin_until(Ready ready, bool spin = true) {
  if (!spin) return ready();
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      AG_PAUSE();
    }
    if (std::chrono::steady_clock::now() - start > kSpin) return ready();
  }
}

class Pool {
 public:
  // Starts threads - 1 workers. If one cannot be started (the system's thread limit, or memory), the
  // workers already running are stopped and joined and a std::runtime_error says which one failed.
  explicit Pool(int threads) : threads_(threads), next_(new Claim[threads]) {
    try {
      for (int i = 1; i < threads; ++i) {
        if (const detail::WorkerStartHook hook = g_worker_start_hook.load()) hook(i);
        workers_.emplace_back([this, i] { work(i); });
      }
    } catch (const std::exception& e) {
      const size_t started = workers_.size();
      stop();
      throw std::runtime_error("thread pool: could not start worker thread " + std::to_string(started + 1) +
                               " of " + std::to_string(threads - 1) + " for " + std::to_string(threads) +
                               " threads (" + e.what() + "); use fewer threads");
    }
  }
  ~Pool() { stop(); }
  int size() const { return threads_; }

  void run(int64_t n, detail::ChunkFn fn, void* ctx, bool contended) {
    workers_spin_.store(!contended, std::memory_order_relaxed);
    // The claim word moves to the new generation first: a worker still leaving the previous job can then
    // no longer claim a chunk of it against this job's chunk count and function (jobs of different
    // sizes in a row made that race real).
    const uint64_t gen = generation_.load() + 1;
    const int64_t parts = std::min<int64_t>(n, int64_t(kChunksPerThread) * threads_);
    for (int t = 0; t < threads_; ++t) next_[t].word.store(gen << 32 | uint64_t(first_chunk(t, parts)));
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    parts_.store(parts);
    completed_.store(0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.store(gen);
    }
    wake_.notify_all();
    drain(gen, 0);
    if (!spin_until([this] { return completed_.load() == parts_; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return completed_.load() == parts_; });
    }
  }

 private:
  // Chunks per thread: more chunks than threads, claimed first come first served, so a thread the OS
  // has descheduled delays the job by one chunk at most (the others take the rest).
  static constexpr int kChunksPerThread = 4;

  // Thread t's own run of a job's chunks starts here (and ends where thread t + 1's starts).
  int64_t first_chunk(int t, int64_t parts) const { return parts * t / threads_; }

  // Claims the next chunk of thread t's run of job `gen`: its index, or -1 when that run is used up or
  // the job has ended. A claim is a compare-and-swap on the run's (generation << 32 | next chunk), so a
  // late thread can never claim a chunk of a newer job by mistake.
  int64_t claim(uint64_t gen, int t, int64_t parts) {
    std::atomic<uint64_t>& next = next_[t].word;
    uint64_t v = next.load();
    do {
      if ((v >> 32) != gen || static_cast<int64_t>(v & 0xffffffffu) >= first_chunk(t + 1, parts)) return -1;
    } while (!next.compare_exchange_weak(v, v + 1));
    return static_cast<int64_t>(v & 0xffffffffu);
  }

  // Claims and runs chunks of job `gen` until none is left: thread `self`'s own run first, then the
  // others' in turn.
  void drain(uint64_t gen, int self) {
    for (int k = 0; k < threads_; ++k) {
      const int t = (self + k) % threads_;
      const int64_t parts = parts_.load();
      for (int64_t c; (c = claim(gen, t, parts)) >= 0;) {
        const int64_t b = n_ * c / parts, e = n_ * (c + 1) / parts;
        t_in_region = true;
        fn_(ctx_, b, e);
        t_in_region = false;
        if (completed_.fetch_add(1) + 1 == parts) {
          std::lock_guard<std::mutex> lock(mutex_);
          done_.notify_one();
        }
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void work(int self) {
    uint64_t seen = 0;
    for (;;) {
      if (!spin_until([&] { return generation_.load() != seen; },
                      workers_spin_.load(std::memory_order_relaxed))) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
      }
      seen = generation_.load();
      if (stop_) return;
      drain(seen, self);
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  // The next chunk of each thread's run, tagged with the job's generation; a cache line each, so claims
  // on different runs do not contend.
  struct alignas(64) Claim {
    std::atomic<uint64_t> word{0};
  };
  std::unique_ptr<Claim[]> next_;
  std::atomic<int64_t> completed_{0};
  bool stop_ = false;
  std::atomic<bool> workers_spin_{true};
  detail::ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> parts_{0};  // read by late workers of the previous job, hence atomic
};

std::atomic<int> g_threads{1};
std::unique_ptr<Pool> g_pool;
std::mutex g_pool_mutex;
detail::CpuContention g_contention;  // guarded by g_pool_mutex
std::atomic<detail::Contention> g_contention_mode{detail::Contention::kMeasured};

// Makes sure the pool matches num_threads(); the caller holds g_pool_mutex. The old pool is replaced only
// once the new one has started, so a failure leaves it as it was.
void ensure_pool() {
  if (!g_pool || g_pool->size() != num_threads()) g_pool = std::make_unique<Pool>(num_threads());
}

}  // namespace

void set_num_threads(int n) {
  n = n < 1 ? 1 : n;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  const int previous = g_threads.exchange(n);
  if (n < 2) return;
  try {
    ensure_pool();  // start the workers now, so a failure surfaces here rather than inside an op
  } catch (...) {
    g_threads.store(previous);
    throw;
  }
}

int num_threads() {
  return g_threads.load();
}

namespace detail {

bool in_parallel_region() {
  return t_in_region;
}

void set_worker_start_hook(WorkerStartHook hook) {
  g_worker_start_hook.store(hook);
}

void set_contention(Contention mode) {
  g_contention_mode.store(mode);
}

void run_parallel(int64_t n, int64_t work, ChunkFn fn, void* ctx) {
  {
    // Held for the whole job: two threads calling into the engine at once take turns on the pool.
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    const Contention mode = g_contention_mode.load();
    const bool contended = mode == Contention::kMeasured
                               ? g_contention.contended(std::chrono::steady_clock::now())
                               : mode == Contention::kBusy;
    if (!contended || work >= kContendedMinWork) {
      ensure_pool();
      g_pool->run(n, fn, ctx, contended);
      return;
    }
  }
  fn(ctx, 0, n);  // outside the lock: the job's own parallel_for calls may use the pool
}

}  // namespace detail

}  // namespace ag
