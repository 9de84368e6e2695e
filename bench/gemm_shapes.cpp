// gemm_shapes: the GEMMs of one medium training step (bench/configs/medium.json: 2048 tokens, width 512,
// d_ff 2048, 4 layers), timed one by one as a step meets them, not a test. For each layer's four Linears
// (Wq|Wk|Wv as one, Wo, fc1, fc2) the three products: forward x W^T (B a transposed weight), the input
// gradient dY W and the weight gradient dY^T X (A a transposed activation gradient). Every layer has
// buffers of its own and the list is run in order, so each product finds its operands out of cache, as
// in a step, where another op touched them last. Per product, on 1 and on 2 threads: the median time over
// the rounds, its GFLOP/s and the rounds' spread (ag::timing_stats); then the sum of the medians over all
// layers. Compare with `attograd bench`'s peak_fma_gflops.
// Usage: gemm_shapes [--rounds N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "autograd/gemm.h"
#include "autograd/threads.h"
#include "autograd/timing.h"

namespace {

enum class Kind { kForward, kInputGrad, kWeightGrad };

struct Product {
  const char* name;
  int64_t rows, cols, inner;
  Kind kind;
};

struct Operands {
  std::vector<float> a, b, c;
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
  const int64_t tokens = 2048, width = 512, d_ff = 2048, layers = 4;
  const std::vector<Product> products = {
      {"qkv forward", tokens, 3 * width, width, Kind::kForward},
      {"out forward", tokens, width, width, Kind::kForward},
      {"fc1 forward", tokens, d_ff, width, Kind::kForward},
      {"fc2 forward", tokens, width, d_ff, Kind::kForward},
      {"qkv dX", tokens, width, 3 * width, Kind::kInputGrad},
      {"out dX", tokens, width, width, Kind::kInputGrad},
      {"fc1 dX", tokens, width, d_ff, Kind::kInputGrad},
      {"fc2 dX", tokens, d_ff, width, Kind::kInputGrad},
      {"qkv dW", 3 * width, width, tokens, Kind::kWeightGrad},
      {"out dW", width, width, tokens, Kind::kWeightGrad},
      {"fc1 dW", d_ff, width, tokens, Kind::kWeightGrad},
      {"fc2 dW", width, d_ff, tokens, Kind::kWeightGrad},
  };
  std::vector<Operands> operands;
  for (int64_t l = 0; l < layers; ++l)
    for (const Product& p : products)
      operands.push_back({std::vector<float>(p.rows * p.inner, 0.5f),
                          std::vector<float>(p.inner * p.cols, 0.25f), std::vector<float>(p.rows * p.cols)});

  std::printf("medium's step products, %ld layers of separate buffers, median of %d rounds:\n",
              static_cast<long>(layers), rounds);
  for (int threads : {1, 2}) {
    ag::set_num_threads(threads);
    std::vector<std::vector<double>> seconds(products.size());
    for (int r = 0; r < rounds; ++r)
      for (int64_t l = 0; l < layers; ++l)
        for (size_t i = 0; i < products.size(); ++i) {
          const Product& p = products[i];
          Operands& o = operands[l * products.size() + i];
          // A weight gradient's A is dY^T: dY stored tokens x outputs. A forward's B is W^T: W stored
          // outputs x inputs.
          const ag::MatView<float> a = p.kind == Kind::kWeightGrad ? ag::MatView<float>{o.a.data(), 1, p.rows}
                                                                   : ag::row_major(o.a.data(), p.inner);
          const ag::MatView<float> b = p.kind == Kind::kForward ? ag::MatView<float>{o.b.data(), 1, p.inner}
                                                                : ag::row_major(o.b.data(), p.cols);
          const auto start = ag::TimingClock::now();
          ag::gemm<float>(p.rows, p.cols, p.inner, a, b, o.c.data(), p.cols, false);
          seconds[i].push_back(ag::seconds_since(start));
        }
    double total = 0;
    for (size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      const ag::TimingStats t = ag::timing_stats(seconds[i]);
      total += t.median * layers;
      std::printf("  %d thr  %-12s %5ld x %4ld x %4ld  %7.2f ms  %6.1f GFLOP/s  spread %3.0f%%\n", threads,
                  p.name, static_cast<long>(p.rows), static_cast<long>(p.cols), static_cast<long>(p.inner),
                  t.median * 1e3, 2.0 * p.rows * p.cols * p.inner / t.median / 1e9, 100 * t.spread);
    }
    std::printf("  %d thr  all %ld layers' products: %.1f ms\n", threads, static_cast<long>(layers),
                total * 1e3);
  }
  return 0;
}
