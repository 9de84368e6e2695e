// What `attograd bench` measures, as plain data, and its one JSON line (the same fields as
// bench/torch_bench.py prints, so the two can be read side by side):
//   impl, config, mode ("train" or "forward"), threads, shards, tokens_per_s, step_ms_median, step_ms_min,
//   peak_rss_mb, params, gflops_per_s, cpu, vector_isa, vector_bits, peak_fma_gflops, mfu,
//   eigen_gemm_gflops, mfu_vs_eigen_gemm, engine_gemm_gflops, other_processes_cores (null when unknown)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace findings {

struct BenchReport {
  std::string config, mode = "train";
  int threads = 0, shards = 1;
  double tokens_per_s = 0, step_ms_median = 0, step_ms_min = 0, peak_rss_mb = 0;
  int64_t params = 0;
  double gflops_per_s = 0;
  std::string cpu, vector_isa;
  int vector_bits = 0;
  double peak_fma_gflops = 0, eigen_gemm_gflops = 0, engine_gemm_gflops = 0;
  // Other processes' CPU use over the timed steps, in cores: a result taken on a busy machine says so.
  std::optional<double> other_processes_cores;
};

inline nlohmann::json bench_to_json(const BenchReport& r) {
  return {{"impl", "attograd"},
          {"config", r.config},
          {"mode", r.mode},
          {"threads", r.threads},
          {"shards", r.shards},
          {"tokens_per_s", r.tokens_per_s},
          {"step_ms_median", r.step_ms_median},
          {"step_ms_min", r.step_ms_min},
          {"peak_rss_mb", r.peak_rss_mb},
          {"params", r.params},
          {"gflops_per_s", r.gflops_per_s},
          {"cpu", r.cpu},
          {"vector_isa", r.vector_isa},
          {"vector_bits", r.vector_bits},
          {"peak_fma_gflops", r.peak_fma_gflops},
          {"mfu", r.gflops_per_s / r.peak_fma_gflops},
          {"eigen_gemm_gflops", r.eigen_gemm_gflops},
          {"mfu_vs_eigen_gemm", r.gflops_per_s / r.eigen_gemm_gflops},
          {"engine_gemm_gflops", r.engine_gemm_gflops},
          {"other_processes_cores",
           r.other_processes_cores ? nlohmann::json(*r.other_processes_cores) : nlohmann::json(nullptr)}};
}

}  // namespace findings
