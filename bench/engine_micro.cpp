// engine_micro: the engine's own micro-benchmark, not a test. One thread throughout.
//   1. A 512x512 float32 matmul through ag::matmul (graph recorded, output allocated) against the same
//      product in raw Eigen into a preallocated matrix: medians over many repetitions.
//   2. Graph overhead: ns per small elementwise op with its backward (add of two 8-element tensors,
//      chained 1000 deep, forward + backward, divided by the chain length), and the forward alone.
//   3. Fused attention (ag::attention) at the tiny bench config's shape, B 32, T 32, D 64, 4 heads, causal:
//      microseconds per (batch, head) pair, forward without a graph and forward + backward.
// Usage: engine_micro [--reps N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/threads.h"
#include "autograd/timing.h"
#include "nn/attention.h"

namespace {

// The median of `reps` timed runs of f after three untimed ones.
template <typename F>
double median_seconds(int reps, F&& f) {
  return ag::median(ag::time_runs(3, reps, f));
}

volatile float g_sink;

}  // namespace

int main(int argc, char** argv) {
  int reps = 101;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(5, std::atoi(argv[i + 1]));
  ag::set_num_threads(1);

  // 1. 512x512 float32 GEMM.
  const int64_t n = 512;
  ag::Rng rng(1);
  ag::Tensor<float> a = ag::Tensor<float>::empty({n, n}, true), b = ag::Tensor<float>::empty({n, n}, true);
  for (int64_t i = 0; i < n * n; ++i) {
    a.data()[i] = static_cast<float>(rng.normal());
    b.data()[i] = static_cast<float>(rng.normal());
  }
  ag::Mat<float> c(n, n);
  // Interleave the two so drift in machine load hits both alike.
  std::vector<double> eigen_t, engine_t;
  for (int r = 0; r < reps; ++r) {
    eigen_t.push_back(median_seconds(1, [&] {
      c.noalias() = a.mat() * b.mat();
      g_sink = c(0, 0);
    }));
    engine_t.push_back(median_seconds(1, [&] {
      ag::Tensor<float> y = ag::matmul(a, b);
      g_sink = y.data()[0];
    }));
  }
  const double eigen_s = ag::median(eigen_t), engine_s = ag::median(engine_t);
  const double flops = 2.0 * n * n * n;

  // 2. Graph overhead on a chain of small adds.
  const int chain = 1000;
  ag::Tensor<float> x0 = ag::Tensor<float>::full({8}, 1.f, true),
                    y0 = ag::Tensor<float>::full({8}, 0.5f, true);
  const double fwd_bwd = median_seconds(reps, [&] {
    ag::Tensor<float> x = x0;
    for (int i = 0; i < chain; ++i) x = ag::add(x, y0);
    x.backward(std::vector<float>(8, 1.f));
    g_sink = x.data()[0];
    x0.zero_grad();
    y0.zero_grad();
  });
  const double fwd = median_seconds(reps, [&] {
    ag::Tensor<float> x = x0;
    for (int i = 0; i < chain; ++i) x = ag::add(x, y0);
    g_sink = x.data()[0];
  });
  ag::Tensor<float> x1 = ag::Tensor<float>::full({8}, 1.f), y1 = ag::Tensor<float>::full({8}, 0.5f);
  const double fwd_nograd = median_seconds(reps, [&] {
    ag::Tensor<float> x = x1;
    for (int i = 0; i < chain; ++i) x = ag::add(x, y1);
    g_sink = x.data()[0];
  });

  // 3. Fused attention at tiny's shape.
  const int64_t B = 32, T = 32, D = 64, H = 4;
  ag::Tensor<float> q = ag::Tensor<float>::empty({B, T, D}, true),
                    k = ag::Tensor<float>::empty({B, T, D}, true),
                    v = ag::Tensor<float>::empty({B, T, D}, true);
  for (ag::Tensor<float>* t : {&q, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = static_cast<float>(rng.normal());
  const ag::Tensor<float> mask = nn::causal_mask<float>(T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D / H));
  const double attn_fwd = median_seconds(reps, [&] {
    ag::NoGradScope no_grad;
    const ag::Tensor<float> y = ag::attention(q, k, v, H, mask, scale);
    g_sink = y.data()[0];
  });
  const double attn_fwd_bwd = median_seconds(reps, [&] {
    ag::Tensor<float> y = ag::attention(q, k, v, H, mask, scale);
    ag::sum(y).backward();
    g_sink = q.grad()[0];
    for (ag::Tensor<float>* t : {&q, &k, &v}) t->zero_grad();
  });

  std::printf("matmul 512x512 float32, 1 thread, median of %d:\n", reps);
  std::printf("  raw Eigen   %8.3f ms  %6.1f GFLOP/s\n", eigen_s * 1e3, flops / eigen_s / 1e9);
  std::printf("  ag::matmul  %8.3f ms  %6.1f GFLOP/s  (%+.1f%% vs Eigen)\n", engine_s * 1e3,
              flops / engine_s / 1e9, 100 * (engine_s / eigen_s - 1));
  std::printf("graph overhead, add of two 8-element tensors, chain of %d, median of %d:\n", chain, reps);
  std::printf("  forward + backward  %7.1f ns per op\n", fwd_bwd / chain * 1e9);
  std::printf("  forward (recorded)  %7.1f ns per op\n", fwd / chain * 1e9);
  std::printf("  forward (no grad)   %7.1f ns per op\n", fwd_nograd / chain * 1e9);
  std::printf("fused attention, B %ld T %ld D %ld, %ld heads, causal, median of %d:\n", static_cast<long>(B),
              static_cast<long>(T), static_cast<long>(D), static_cast<long>(H), reps);
  std::printf("  forward (no grad)   %7.2f us per (batch, head)\n", attn_fwd / (B * H) * 1e6);
  std::printf("  forward + backward  %7.2f us per (batch, head)\n", attn_fwd_bwd / (B * H) * 1e6);
  return 0;
}
