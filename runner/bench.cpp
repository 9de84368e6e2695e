// Timing training steps exactly as the trainer runs them (forward, cross-entropy, backward, global-norm
// clip, AdamW), or forward passes alone with no graph recorded (as evaluation and the study tools run
// them): the same fields as bench/torch_bench.py. Batch sampling is outside the timed region (as in
// torch_bench.py); warm-up steps are excluded. Not a training run: no run folder, no checkpoints.
//
// The MFU is measured against the machine's FMA peak, taken in the same process: every thread runs a
// register-only loop of fused multiply-adds at the native vector width (docs/performance.md).
#include "runner/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "autograd/cpu_contention.h"
#include "autograd/gemm.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "autograd/timing.h"
#include "train/config.h"
#include "train/training_step.h"

namespace runner {

namespace {

using Clock = ag::TimingClock;
using ag::seconds_since;

// The vector width the FMA peak is measured at: the widest this binary was compiled for (the GEMM's
// micro-kernel uses the same width, and its instruction set is ag::gemm_vector_isa()).
#if defined(__AVX512F__)
constexpr int kPeakVectorBytes = 64;
constexpr int kPeakChains = 24;  // of 32 registers: enough independent FMAs to cover latency x pipes
#elif defined(__AVX__)
constexpr int kPeakVectorBytes = 32;
constexpr int kPeakChains = 12;  // of 16 registers
#else
constexpr int kPeakVectorBytes = 16;
constexpr int kPeakChains = 12;
#endif
typedef float PeakVec __attribute__((vector_size(kPeakVectorBytes)));
constexpr int kPeakLanes = kPeakVectorBytes / int(sizeof(float));

// The CPU's model name from /proc/cpuinfo ("unknown" where there is none).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        return b == std::string::npos ? "unknown" : line.substr(b);
      }
    }
  return "unknown";
}

// `iterations` rounds of kPeakChains independent vector FMAs (acc = acc * m + a, which the compiler
// contracts to one FMA each), all in registers: the most float32 arithmetic a core can issue. The chains
// converge to a / (1 - m), so nothing overflows or goes subnormal. Returns a sum so nothing is dropped.
__attribute__((noinline)) float fma_loop(int64_t iterations, float m, float a) {
  PeakVec acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = PeakVec{} + float(i);
  const PeakVec mv = PeakVec{} + m, av = PeakVec{} + a;
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 32
    for (int i = 0; i < kPeakChains; ++i) acc[i] = acc[i] * mv + av;
  }
  PeakVec sum{};
  for (int i = 0; i < kPeakChains; ++i) sum += acc[i];
  float total = 0;
  for (int l = 0; l < kPeakLanes; ++l) total += sum[l];
  return total;
}

// Runs of the FMA loop in a peak measurement. The best run counts: a shared machine only ever makes the
// loop slower, and so does a core just woken from idle, which can take a few tenths of a second of work
// to reach its full clock, so the runs span a second.
constexpr int kPeakRuns = 10;
// The least time the bench's warm-up steps take (see run).
constexpr double kMinWarmupSeconds = 1.0;

// The machine's float32 FMA peak at `threads` threads, in GFLOP/s (an FMA counts 2 flops): one thread per
// worker, each running fma_loop for about `seconds` / kPeakRuns, all started together; the best of
// kPeakRuns runs.
double measure_fma_peak_gflops(int threads, double seconds) {
  volatile float m = 0.999f, a = 1e-3f;
  // Calibrate: iterations per second on one thread.
  int64_t probe = 1 << 16;
  double probe_s = 0;
  for (;;) {
    const auto start = Clock::now();
    volatile float sink = fma_loop(probe, m, a);
    (void)sink;
    probe_s = seconds_since(start);
    if (probe_s > 0.01) break;
    probe *= 4;
  }
  const int64_t iterations = std::max<int64_t>(1, int64_t(double(probe) * seconds / kPeakRuns / probe_s));
  const double flops = 2.0 * kPeakChains * kPeakLanes * double(iterations) * threads;
  double best = 0;
  for (int run = 0; run < kPeakRuns; ++run) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<float> sinks(threads);
    std::vector<std::thread> pool;
    try {
      for (int t = 1; t < threads; ++t)
        pool.emplace_back([&, t] {
          ready.fetch_add(1);
          while (!go.load()) std::this_thread::yield();
          sinks[t] = fma_loop(iterations, m, a);
        });
    } catch (const std::system_error& e) {
      // The system refused a thread: let the started ones finish, then say so in one line.
      go.store(true);
      for (auto& t : pool) t.join();
      throw std::runtime_error("threads " + std::to_string(threads) + ": cannot start that many threads (" +
                               e.code().message() + ")");
    }
    while (ready.load() != threads - 1) std::this_thread::yield();
    const auto start = Clock::now();
    go.store(true);
    sinks[0] = fma_loop(iterations, m, a);
    for (auto& t : pool) t.join();
    const double s = seconds_since(start);
    volatile float sink = sinks[0];
    (void)sink;
    best = std::max(best, flops / s / 1e9);
  }
  return best;
}

// A float32 GEMM rate, reported beside the FMA peak (eigen_gemm_gflops, with mfu_vs_eigen_gemm): an Eigen
// 512x512x512 product, split by blocks of 16 output rows over the engine's pool at `threads` (Eigen's own
// OpenMP threading runs far below one thread on a shared machine); the median of many
// repetitions, in GFLOP/s (2 n^3 flops per product). With `engine` set, the same product through
// ag::matmul (the engine's own GEMM) instead (engine_gemm_gflops).
double measure_gemm_gflops(int threads, bool engine) {
  const int64_t n = 512;
  const int reps = 40;
  ag::set_num_threads(threads);
  ag::NoGradScope no_grad;
  ag::Tensor<float> a = ag::Tensor<float>::full({n, n}, 0.5f), b = ag::Tensor<float>::full({n, n}, 0.25f);
  ag::Tensor<float> c = ag::Tensor<float>::zeros({n, n});
  const ag::ConstMatMap<float> am(a.data(), n, n), bm(b.data(), n, n);
  ag::MatMap<float> cm(c.data(), n, n);
  const std::vector<double> times = ag::time_runs(3, reps, [&] {
    if (engine) {
      c = ag::matmul(a, b);
    } else {
      const int64_t blocks = n / 16;
      ag::parallel_for(blocks, 2 * n * n * n, [&](int64_t b0, int64_t b1) {
        cm.middleRows(b0 * 16, (b1 - b0) * 16).noalias() = am.middleRows(b0 * 16, (b1 - b0) * 16) * bm;
      });
    }
  });
  return 2.0 * n * n * n / ag::median(times) / 1e9;
}

}  // namespace

analysis::Output<findings::BenchReport> bench(const BenchRequest& a, const BenchProgress& progress) {
  if (a.steps < 1) throw analysis::RequestError("steps: expected at least 1, got " + std::to_string(a.steps));
  if (a.warmup < 0)
    throw analysis::RequestError("warmup: expected at least 0, got " + std::to_string(a.warmup));
  if (a.threads < 0)
    throw analysis::RequestError("threads: expected at least 1 (0 = the config's), got " +
                                 std::to_string(a.threads));
  if (!(a.peak_gflops >= 0) || !std::isfinite(a.peak_gflops))
    throw analysis::RequestError("peak_gflops: expected a positive number (0 = measured)");
  const train::Config config = train::load_config(a.config, a.sets);
  const int threads = a.threads > 0 ? a.threads : config.train.threads;
  // As train.threads: more threads than this are a mistake (and may not be startable at all).
  if (threads > train::max_threads())
    throw analysis::RequestError("threads " + std::to_string(threads) + ": must be <= " +
                                 std::to_string(train::max_threads()) + " (4 x this machine's cores)");
  if (progress) progress(0, 0, true, 0);  // measuring the FMA peak and GEMM rates
  const double peak = a.peak_gflops > 0 ? a.peak_gflops : measure_fma_peak_gflops(threads, 1.0);
  const double eigen_gemm = measure_gemm_gflops(threads, false);
  const double engine_gemm = measure_gemm_gflops(threads, true);
  ag::set_num_threads(threads);

  train::TrainingStep trainer(config, /*with_optimizer=*/!a.forward);
  int64_t non_embedding = 0;
  for (const auto& p : trainer.model().named_parameters())
    if (p.name.rfind("tok_emb.", 0) != 0 && p.name.rfind("pos_emb.", 0) != 0)
      non_embedding += p.tensor->numel();
  // train.batch_size 0 is a finite dataset's whole training set every step.
  const int64_t B = config.train.batch_size > 0 ? config.train.batch_size : trainer.task().split_size(false);
  const int T = trainer.task().seq_len();
  std::vector<double> step_seconds;
  // Other processes' CPU use over the timed steps, so that a result taken on a busy machine says so.
  double all_cpu_start = 0, own_cpu_start = 0;
  Clock::time_point timed_start;
  // The warm-up runs at least a.warmup steps and, unless there are none, at least kMinWarmupSeconds: a
  // core woken from idle needs that long to reach its full clock (see kPeakRuns), and with --peak-gflops
  // nothing before the steps has kept the cores busy (a small config's first steps would run slow).
  const auto warmup_start = Clock::now();
  int warmup = a.warmup;
  for (int step = 0; step < warmup + a.steps; ++step) {
    if (step == warmup && a.warmup > 0 && seconds_since(warmup_start) < kMinWarmupSeconds) ++warmup;
    const train::Batch batch = trainer.next_batch(step);
    const auto start = Clock::now();
    if (step == warmup) {
      timed_start = start;
      ag::cpu_seconds(all_cpu_start, own_cpu_start);
    }
    try {
      if (a.forward) {
        const ag::Tensor<float> logits = trainer.forward(batch);
        if (!std::isfinite(logits.data()[logits.numel() - 1]))
          throw train::TrainingDiverged("a logit became non-finite at step " + std::to_string(step + 1));
      } else {
        trainer.run(batch, step);
      }
    } catch (const train::TrainingDiverged& e) {
      throw std::runtime_error(a.config + ": " + e.what() + " of the bench");
    }
    const double elapsed = seconds_since(start);
    if (step >= warmup) step_seconds.push_back(elapsed);
    if (progress) progress(step + 1, warmup + a.steps, step < warmup, elapsed);
  }
  double all_cpu_end = 0, own_cpu_end = 0;
  const bool cpu_known = ag::cpu_seconds(all_cpu_end, own_cpu_end);
  const double other_cores = ((all_cpu_end - all_cpu_start) - (own_cpu_end - own_cpu_start)) /
                             std::max(1e-9, seconds_since(timed_start));
  const ag::TimingStats stats = ag::timing_stats(step_seconds);
  const double med = stats.median;
  const double tokens = double(B) * T;
  // A training step: 6 flops per non-embedding parameter per token (2 forward, 4 backward) and the
  // attention products (q k^T and P v: 4 T^2 d_model per sequence and layer forward, twice that backward).
  // A forward pass alone is a third of both.
  const double train_flops = 6.0 * double(non_embedding) * tokens +
                             12.0 * config.model.n_layers * double(T) * T * config.model.d_model * B;
  const double flops = a.forward ? train_flops / 3 : train_flops;
  const double gflops = flops / med / 1e9;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  analysis::Output<findings::BenchReport> out;
  findings::BenchReport& r = out.result;
  r.config = config.name;
  r.mode = a.forward ? "forward" : "train";
  r.threads = threads;
  r.shards = a.forward ? 1 : config.train.shards;
  r.tokens_per_s = tokens / med;
  r.step_ms_median = med * 1e3;
  r.step_ms_min = stats.min * 1e3;
  r.peak_rss_mb = usage.ru_maxrss / 1024.0;
  r.params = trainer.model().parameter_count();
  r.gflops_per_s = gflops;
  r.cpu = cpu_model();
  r.vector_isa = ag::gemm_vector_isa();
  r.vector_bits = kPeakVectorBytes * 8;
  r.peak_fma_gflops = peak;
  r.eigen_gemm_gflops = eigen_gemm;
  r.engine_gemm_gflops = engine_gemm;
  if (cpu_known) r.other_processes_cores = std::max(0.0, other_cores);  // unknown without /proc/stat
  return out;
}

}  // namespace runner
