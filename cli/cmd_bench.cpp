// attograd bench CONFIG [--forward] [--steps N] [--threads N] [--warmup N] [--peak-gflops X]
//                       [--set key=value]...: parses the flags into a runner::BenchRequest, calls
// runner::bench and prints its one JSON line; progress on stderr when it is a terminal.
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/print.h"
#include "runner/bench.h"

namespace cli {

Command add_bench(CLI::App& app) {
  auto a = std::make_shared<runner::BenchRequest>();
  CLI::App* sub = app.add_subcommand("bench", "time training steps (or forward passes); print one JSON line");
  sub->add_option("CONFIG", a->config, "config JSON (bench/configs/*.json)")->required();
  add_number(sub, "--steps", a->steps, "timed steps (default 20)", io::at_least(1));
  add_number(sub, "--warmup", a->warmup,
             "untimed warm-up steps (default 3; unless 0, they last at least 1 s)", io::at_least(0));
  add_number(sub, "--threads", a->threads, "threads (default: the config's train.threads)", io::at_least(1));
  sub->add_flag("--forward", a->forward, "time forward passes without gradients (no graph, no backward)");
  add_number(sub, "--peak-gflops", a->peak_gflops,
             "the machine's peak for mfu (default: measured, a float32 FMA loop on every thread)",
             io::above(0));
  sub->add_option("--set", a->sets, "override a config field, key.path=value (repeatable)");
  sub->add_flag("--json", "print one JSON line (always: bench prints nothing else on stdout)");
  return [a] {
    // Progress for a person at a terminal, on stderr (stdout carries only the JSON line).
    const bool tty = isatty(fileno(stderr)) != 0;
    runner::BenchProgress progress;
    if (tty)
      progress = [](int step, int steps, bool warmup, double seconds) {
        if (step == 0)
          std::fprintf(stderr, "bench: measuring the FMA peak and GEMM rates...");
        else
          std::fprintf(stderr, "\r\033[Kbench: step %d/%d%s, %.1f ms", step, steps,
                       warmup ? " (warm-up)" : "", seconds * 1e3);
      };
    const auto out = runner::bench(*a, progress);
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::printf("%s\n", findings::bench_to_json(out.result).dump().c_str());
    return 0;
  };
}

}  // namespace cli
