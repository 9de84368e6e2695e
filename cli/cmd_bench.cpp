// attograd bench CONFIG [--steps N] [--threads N] [--warmup N] [--peak-gflops X] [--set key=value]...
// Times full training steps exactly as the trainer runs them (forward, cross-entropy, backward, global-norm
// clip, AdamW) and prints one JSON line, the same fields as bench/torch_bench.py (issue 6). Batch sampling
// is outside the timed region (as in torch_bench.py); warm-up steps are excluded. Not a training run: no
// run folder, no checkpoints, no evaluation.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "cli/commands.h"
#include "train/training_step.h"

namespace cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The machine's float32 GEMM rate, as issue 6 defines the peak for the MFU: an Eigen 512x512x512 product,
// split by blocks of 16 output rows over the engine's pool at `threads` (Eigen's own OpenMP threading
// measured 5 to 10 times below one thread on a shared machine, which would make the MFU meaningless);
// the median of many repetitions, in GFLOP/s (2 n^3 flops per product). With `engine` set, the same
// product through ag::matmul (the engine's own GEMM) instead, reported beside it.
double measure_gemm_gflops(int threads, bool engine) {
  const int64_t n = 512;
  const int reps = 40;
  ag::set_num_threads(threads);
  ag::NoGradScope no_grad;
  ag::Tensor<float> a = ag::Tensor<float>::full({n, n}, 0.5f), b = ag::Tensor<float>::full({n, n}, 0.25f);
  ag::Tensor<float> c = ag::Tensor<float>::zeros({n, n});
  const ag::ConstMatMap<float> am(a.data(), n, n), bm(b.data(), n, n);
  ag::MatMap<float> cm(c.data(), n, n);
  std::vector<double> times;
  for (int r = 0; r < reps + 3; ++r) {
    const auto start = Clock::now();
    if (engine) {
      c = ag::matmul(a, b);
    } else {
      const int64_t blocks = n / 16;
      ag::parallel_for(blocks, 2 * n * n * n, [&](int64_t b0, int64_t b1) {
        cm.middleRows(b0 * 16, (b1 - b0) * 16).noalias() = am.middleRows(b0 * 16, (b1 - b0) * 16) * bm;
      });
    }
    if (r >= 3) times.push_back(seconds_since(start));
  }
  return 2.0 * n * n * n / median(times) / 1e9;
}

struct Args {
  std::string config;
  std::vector<std::string> sets;
  int steps = 20, warmup = 3, threads = 0;
  double peak_gflops = 0;
};

int run(const Args& a) {
  const train::Config config = train::load_config(a.config, a.sets);
  const int threads = a.threads > 0 ? a.threads : config.train.threads;
  // Progress for a person at a terminal, on stderr (stdout carries only the JSON line); nothing elsewhere.
  const bool tty = isatty(fileno(stderr)) != 0;
  if (tty) std::fprintf(stderr, "bench: measuring GEMM rates...");
  const double peak = a.peak_gflops > 0 ? a.peak_gflops : measure_gemm_gflops(threads, false);
  const double engine_gemm = measure_gemm_gflops(threads, true);
  ag::set_num_threads(threads);

  train::TrainingStep trainer(config);
  int64_t non_embedding = 0;
  for (const auto& p : trainer.model().named_parameters())
    if (p.name.rfind("tok_emb.", 0) != 0 && p.name.rfind("pos_emb.", 0) != 0)
      non_embedding += p.tensor->numel();
  const int B = config.train.batch_size, T = trainer.task().seq_len();
  std::vector<double> step_seconds;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    const train::Batch batch = trainer.next_batch();
    const auto start = Clock::now();
    try {
      trainer.run(batch, step);
    } catch (const train::TrainingDiverged& e) {
      throw std::runtime_error(a.config + ": " + e.what() + " of the bench");
    }
    const double elapsed = seconds_since(start);
    if (step >= a.warmup) step_seconds.push_back(elapsed);
    if (tty)
      std::fprintf(stderr, "\r\033[Kbench %s: step %d/%d%s, %.1f ms", config.name.c_str(), step + 1,
                   a.warmup + a.steps, step < a.warmup ? " (warm-up)" : "", elapsed * 1e3);
  }
  const double med = median(step_seconds);
  const double tokens = double(B) * T;
  const double flops = 6.0 * double(non_embedding) * tokens +
                       12.0 * config.model.n_layers * double(T) * T * config.model.d_model * B;
  const double gflops = flops / med / 1e9;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const nlohmann::json out{{"impl", "attograd"},
                           {"config", config.name},
                           {"threads", threads},
                           {"tokens_per_s", tokens / med},
                           {"step_ms_median", med * 1e3},
                           {"step_ms_min", *std::min_element(step_seconds.begin(), step_seconds.end()) * 1e3},
                           {"peak_rss_mb", usage.ru_maxrss / 1024.0},
                           {"params", trainer.model().parameter_count()},
                           {"gflops_per_s", gflops},
                           {"peak_gflops", peak},
                           {"engine_gemm_gflops", engine_gemm},
                           {"mfu", gflops / peak}};
  if (tty) std::fprintf(stderr, "\r\033[K");
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("bench", "time full training steps; print one JSON line");
  sub->add_option("CONFIG", a->config, "config JSON (bench/configs/*.json)")->required();
  sub->add_option("--steps", a->steps, "timed steps (default 20)")->check(CLI::PositiveNumber);
  sub->add_option("--warmup", a->warmup, "untimed warm-up steps (default 3)")->check(CLI::NonNegativeNumber);
  sub->add_option("--threads", a->threads, "threads (default: the config's train.threads)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--peak-gflops", a->peak_gflops,
                  "the machine's peak for mfu (default: measured, an Eigen 512x512 float32 GEMM)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--set", a->sets, "override a config field, key.path=value (repeatable)");
  return [a] { return run(*a); };
}

}  // namespace cli
