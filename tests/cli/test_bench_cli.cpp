// `attograd bench` as bench/compare reads it: one JSON line per run, training steps or (--forward) forward
// passes, with the FMA peak measured in the same process and the MFU against it.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/run_command.h"

using testing::run_attograd;

namespace {

nlohmann::json bench(const std::string& extra) {
  const auto r = run_attograd("bench bench/configs/tiny.json --steps 2 --warmup 1 --threads 1" + extra);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return nlohmann::json::parse(r.out);  // exactly one JSON document on stdout
}

void check_common(const nlohmann::json& j) {
  BOOST_TEST(j.at("impl") == "attograd");
  BOOST_TEST(j.at("threads") == 1);
  BOOST_TEST(!j.at("cpu").get<std::string>().empty());
  const int bits = j.at("vector_bits");
  BOOST_TEST((bits == 128 || bits == 256 || bits == 512));
  const double peak = j.at("peak_fma_gflops"), gflops = j.at("gflops_per_s");
  BOOST_TEST(peak > 0);
  BOOST_TEST(gflops > 0);
  BOOST_TEST(j.at("mfu").get<double>() == gflops / peak, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(j.at("mfu_vs_eigen_gemm").get<double>() == gflops / j.at("eigen_gemm_gflops").get<double>(),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(j.at("tokens_per_s").get<double>() > 0);
  // Other processes' CPU over the timed steps, in cores (clock ticks over a few milliseconds here, so only
  // its presence is checked): Linux has /proc/stat, so a number, not null.
  BOOST_TEST(j.at("other_processes_cores").is_number());
  BOOST_TEST(j.at("other_processes_cores").get<double>() >= 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_training_bench_reports_the_fma_peak_the_cpu_and_the_mfu) {
  const nlohmann::json j = bench("");
  check_common(j);
  BOOST_TEST(j.at("mode") == "train");
}

BOOST_AUTO_TEST_CASE(forward_mode_counts_a_third_of_the_training_flops) {
  // A fixed peak, so the two MFUs differ only by the FLOP count and the step time.
  const nlohmann::json train = bench(" --peak-gflops 100"), forward = bench(" --forward --peak-gflops 100");
  check_common(forward);
  BOOST_TEST(forward.at("mode") == "forward");
  BOOST_TEST(forward.at("peak_fma_gflops").get<double>() == 100.0);
  // gflops_per_s x step seconds = flops per step: a forward pass is a third of a training step.
  const double train_flops =
      train.at("gflops_per_s").get<double>() * train.at("step_ms_median").get<double>();
  const double forward_flops =
      forward.at("gflops_per_s").get<double>() * forward.at("step_ms_median").get<double>();
  BOOST_TEST(forward_flops * 3 == train_flops, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(a_bad_peak_is_refused) {
  const auto r = run_attograd("bench bench/configs/tiny.json --steps 1 --peak-gflops -3");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.out.empty());
}
