// attograd bench CONFIG [--forward] [--steps N] [--threads N] [--warmup N] [--peak-gflops X]
//                       [--set key=value]...: parses the flags into a runner::BenchRequest, calls
// runner::bench and prints its one JSON line; progress on stderr when it is a terminal.
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "runner/bench.h"
#include "study/fields.h"

namespace cli {

Command add_bench(CLI::App& app) {
  auto a = std::make_shared<runner::BenchRequest>();
  CLI::App* sub = app.add_subcommand("bench", "time training steps (or forward passes); print one JSON line");
  // On the command line 0 is not a --threads or --peak-gflops value but what leaving it out means.
  add_table_options(sub, study::bench_fields(), *a,
                    {{"config", {"CONFIG", "config JSON (bench/configs/*.json)"}},
                     {"sets", {"--set", "override a config field, key.path=value (repeatable)"}},
                     {"threads", {"", "", io::at_least(1)}},
                     {"peak_gflops", {"", "", io::above(0)}}})
      .at("config")
      ->required();
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
