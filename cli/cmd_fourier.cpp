// attograd fourier RUN_DIR [--json]: a modular-addition model read in the Fourier basis of Z_p
// (study/fourier.h, docs/grokking.md): the spectra of its embedding, unembedding and neuron-logit map, its
// neurons' frequencies, the key frequencies, the restricted and excluded losses, the Gini coefficients and
// the sum of squared weights. Writes RUN/fourier/ (fourier.json and the SVGs) and rebuilds report.html.
#include <cstdio>

#include "cli/commands.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/fourier.h"
#include "study/run_study.h"
#include "study/tool.h"

namespace cli {

namespace {

struct Args {
  std::string run;
  bool json = false;
};

int run_fourier(const Args& a) {
  train::LoadedRun run = study::open_run(a.run);
  try {
    study::modular_addition(*run.task);  // refuses anything but modular addition, before the lock
    if (run.config.model.attention_only) throw std::invalid_argument("fourier: the model has no MLP");
  } catch (const std::invalid_argument& e) {
    throw UsageError(a.run + ": " + e.what());
  }
  const io::RunLock lock(a.run);  // one writer per run folder
  const findings::FourierReport r =
      study::write_fourier_files(*run.model, *run.task, run.config, a.run, run.step);
  if (a.json) {
    std::printf("%s\n", findings::fourier_to_json(r).dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): Fourier analysis over all %d^2 pairs\n", a.run.c_str(),
              static_cast<long long>(run.step), r.p);
  std::printf("%s", findings::fourier_summary(r).c_str());
  std::printf("wrote %s, %s/*.svg and %s\n", io::layout::fourier_json(a.run).c_str(),
              io::layout::fourier_dir(a.run).c_str(), io::layout::report_html(a.run).c_str());
  return 0;
}

}  // namespace

Command add_fourier(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "fourier",
      "read a modular-addition model in the Fourier basis: key frequencies, restricted loss, Gini");
  sub->footer(
      "For a run of task.kind modadd or modadd_bare with 2 operands and an odd modulus p "
      "(docs/grokking.md).\n"
      "Key frequencies: those that are the best single frequency of at least 1% of the MLP's neurons (and\n"
      "at least 2), counting neurons whose best frequency explains >= 85% of their variance.\n"
      "Example: attograd fourier runs/grokking --json");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_flag("--json", a->json, "print one JSON object instead of the summary");
  return [a] { return run_fourier(*a); };
}

}  // namespace cli
