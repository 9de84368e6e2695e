// attograd sweep SWEEP.json [-j N] [--print-commands] [--slurm FILE [--cpus-per-task N]] [--json]
// attograd sweep collect DIR [--json]
// The sweep's logic is runner/sweep.h's (which runs to start or resume, the child processes, the Slurm
// script, the summary); this command parses the flags, turns Ctrl-C into stop requests, and prints the
// progress line and the outcome.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>

#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "io/printable.h"
#include "io/run_layout.h"
#include "runner/sweep.h"
#include "study/fields.h"

namespace cli {

namespace {

using clock_type = std::chrono::steady_clock;

// Stop signals received (Ctrl-C, SIGTERM); the sweep passes each on to its running children once.
std::atomic<int> g_stop{0};
extern "C" void on_stop_signal(int) {
  g_stop.fetch_add(1);
}

// While it lives, Ctrl-C and SIGTERM are counted in g_stop (and do not end the sweep itself); the previous
// handlers come back after.
class CountStops {
 public:
  CountStops() {
    g_stop.store(0);
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~CountStops() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  CountStops(const CountStops&) = delete;
  CountStops& operator=(const CountStops&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

struct SweepArgs {
  runner::SweepRequest request;
  study::SweepCollectRequest collect;
  bool json = false, collect_json = false;
};

std::string duration(double seconds) {
  char buf[32];
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// The sweep's lines: the header, a progress line (redrawn at most once a second on a terminal, else one
// line per change of the counts), failures and stop requests. With --json only the runs left to Slurm
// and the failures are told, on stderr.
class SweepPrinter : public runner::SweepObserver {
 public:
  explicit SweepPrinter(bool json) : json_(json), tty_(!json && isatty(STDOUT_FILENO)) {}

  void on_owned(const findings::SweepRunOutcome& o) override {
    std::fprintf(stderr, "run %s: skipped, Slurm %s\n", o.name.c_str(), o.owner.c_str());
  }

  void on_start(const findings::SweepResult& r) override {
    if (json_) return;
    std::printf("sweep %s: %lld runs (%lld finished already%s), %d at a time with %d threads each, into %s\n",
                r.sweep.c_str(), static_cast<long long>(r.total), static_cast<long long>(r.finished_before),
                r.owned ? (", " + std::to_string(r.owned) + " owned by Slurm tasks").c_str() : "", r.jobs,
                r.threads, r.out.c_str());
    std::fflush(stdout);
  }

  void on_progress(const runner::SweepProgress& p, bool changed) override {
    if (json_) return;
    const std::string eta = p.eta_seconds ? "ETA " + duration(*p.eta_seconds) : "ETA -";
    const std::string counts = "sweep: " + std::to_string(p.done) + "/" + std::to_string(p.total) +
                               " done, " + std::to_string(p.running) + " running, " + std::to_string(p.left) +
                               " left" + (p.failed ? ", " + std::to_string(p.failed) + " failed" : "") +
                               (p.interrupted ? ", " + std::to_string(p.interrupted) + " interrupted" : "");
    const auto now = clock_type::now();
    if (tty_) {
      if (!changed && now - last_draw_ < std::chrono::seconds(1)) return;
      std::printf("\r\033[K%s, %s", counts.c_str(), eta.c_str());
    } else {
      if (counts == last_counts_) return;  // without a terminal, a line per change of the counts
      last_counts_ = counts;
      std::printf("%s, %s\n", counts.c_str(), eta.c_str());
    }
    last_draw_ = now;
    std::fflush(stdout);
  }

  void on_failed(const findings::SweepRunOutcome& o, const std::string& log) override {
    std::FILE* to = json_ ? stderr : stdout;
    if (tty_) std::printf("\n");
    std::fprintf(to, "run %s failed (exit %d): %s (log: %s)\n", o.name.c_str(), o.exit_code,
                 o.problem.c_str(), log.c_str());
  }

  void on_stopping(bool first) override {
    std::FILE* to = json_ ? stderr : stdout;
    if (tty_) std::printf("\n");
    std::fprintf(
        to, first ? "stopping: each running run saves a checkpoint; run the same command again to resume\n"
                  : "stopping now: the runs keep their last checkpoints\n");
    std::fflush(to);
  }

  void finish() const {
    if (tty_) std::printf("\n");
  }

 private:
  bool json_, tty_;
  std::string last_counts_;
  clock_type::time_point last_draw_ = clock_type::now() - std::chrono::seconds(10);
};

int collect(const std::string& dir, bool json) {
  const analysis::Output<findings::SweepSummary> out = runner::sweep_collect(dir);
  size_t finished = 0;
  for (const auto& r : out.result.runs) {
    finished += r.status == "finished";
    if (r.status == "unreadable")
      std::fprintf(stderr, "run %s: unreadable, left out of the numbers: %s\n", r.name.c_str(),
                   io::printable(r.problem).c_str());
  }
  const std::string counts =
      std::to_string(out.result.runs.size()) + " runs (" + std::to_string(finished) + " finished)\n";
  return print_output(json, out, nlohmann::json(findings::sweep_summary_to_json(out.result)), "", counts);
}

int run_sweep(const SweepArgs& a) {
  if (!a.collect.out.empty()) return collect(a.collect.out, a.collect_json || a.json);
  if (a.request.file.empty()) throw UsageError("sweep: SWEEP.json is required (or: sweep collect DIR)");
  SweepPrinter printer(a.json);

  const analysis::Output<findings::SweepResult> out = [&] {
    const CountStops counting;
    return runner::sweep(a.request, &printer, &g_stop);
  }();
  const findings::SweepResult& r = out.result;

  int code = 0;
  if (r.mode == "run") code = r.stopped ? 130 : r.failed ? 1 : 0;
  if (a.json) {
    print_output(true, out, nlohmann::json(findings::sweep_result_to_json(r)), "", "");
    return code;
  }
  if (r.mode == "slurm") {
    std::fprintf(stderr,
                 "wrote %s: %zu array tasks, %d cpus each; sbatch %s, then attograd sweep collect %s\n",
                 r.slurm_script.c_str(), r.runs.size() - static_cast<size_t>(r.finished_before + r.owned),
                 r.cpus_per_task, r.slurm_script.c_str(), r.out.c_str());
    return 0;
  }
  if (r.mode == "commands") {
    for (const std::string& line : r.commands) std::printf("%s\n", line.c_str());
    return 0;
  }
  printer.finish();
  std::printf("summary: %s, %s\n", io::layout::summary_csv(r.out).c_str(),
              io::layout::sweep_index_html(r.out).c_str());
  const long long total = r.total;
  if (r.stopped) {
    std::printf("interrupted: %lld of %lld runs finished; run the same command again to resume the rest\n",
                static_cast<long long>(r.finished_before + r.finished), total);
  } else if (r.failed) {
    std::printf("%lld of %lld runs failed; the others are in the summary\n", static_cast<long long>(r.failed),
                total);
  } else {
    std::printf("done: %lld runs\n", total);
  }
  return code;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* sub = app.add_subcommand("sweep", "train every point of a grid of settings; summarise the runs");
  sub->footer(
      "SWEEP.json: {\"base\": \"configs/induction.json\", \"grid\": {\"seed\": [1, 2, 3]}, \"out\": "
      "\"runs/s\"}.\n"
      "Each grid value is checked like --set before anything starts. Each run is an ordinary run folder\n"
      "OUT/NAME; finished runs are skipped and interrupted ones resumed when the same command runs "
      "again.\n" +
      io::layout::summary_json("OUT") + ", " + io::layout::summary_csv("OUT") + " and " +
      io::layout::sweep_index_html("OUT") + " summarise the sweep (docs/sweeps.md).");
  // --program is Python's: the command line's children run this program. On the command line 0 is not a
  // --jobs or --cpus-per-task value but what leaving it out means.
  const auto table = add_table_options(
      sub, study::sweep_fields(), args->request,
      {{"file", {"SWEEP", "sweep file, e.g. sweeps/induction-seeds.json"}},
       {"jobs", {"-j,--jobs", "", io::at_least(1)}},
       {"print_commands",
        {"", "print one `attograd train` command per unfinished run (for xargs, GNU parallel) and exit"}},
       {"cpus_per_task", {"", "the script's --cpus-per-task and each run's train.threads", io::at_least(1)}}},
      {"program"});
  table.at("cpus_per_task")->needs(table.at("slurm"));
  sub->add_flag("--json", args->json,
                "print what the sweep did (each run's state and outcome) as one JSON line, without progress");
  CLI::App* collect = sub->add_subcommand(
      "collect", "build " + io::layout::summary_json("OUT") + ", " + io::layout::summary_csv("OUT") +
                     " and " + io::layout::sweep_index_html("OUT") + " from the run folders");
  add_table_options(collect, study::sweep_collect_fields(), args->collect, {{"out", {"DIR"}}})
      .at("out")
      ->required();
  collect->add_flag("--json", args->collect_json,
                    "print the summary (summary.json's content) as one JSON line");
  return [args] { return run_sweep(*args); };
}

}  // namespace cli
