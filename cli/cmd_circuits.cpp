// attograd circuits RUN_DIR [--json] [--no-composition]: the circuit read from the weights. Per head the
// copying score of its full OV circuit, layer 0's positional QK maps and their previous-token mass, and the
// direct logit attribution on the held-out set; between heads of different layers the Q/K/V-composition
// scores beside a random baseline. Writes RUN/circuits.json, RUN/circuits/*.svg and rebuilds report.html;
// with --processed, reads TransformerLens-processed weights (study/processing.h) and only prints.
#include <cstdio>

#include "cli/commands.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/circuits.h"
#include "study/processing.h"
#include "study/run_study.h"
#include "study/tool.h"

namespace cli {

namespace {

struct Args {
  std::string run;
  bool json = false, no_composition = false, processed = false;
};

int run_circuits(const Args& a) {
  train::LoadedRun run = study::open_run(a.run);
  study::check_circuits_vocab(run.config.model.vocab, io::layout::model_checkpoint(a.run));
  const io::RunLock lock(a.run);  // one writer per run folder
  const int L = static_cast<int>(run.model->blocks.size());
  if (!a.no_composition && L < 2)
    throw UsageError(a.run + ": composition needs a model with at least 2 layers, this one has " +
                     std::to_string(L) + " (--no-composition gives the per-head numbers)");
  findings::CircuitsResult r;
  if (a.processed) {  // the processed copy, printed only: the run's files stay those of its own weights
    const auto model = study::processed_weights(*run.model);
    const train::Batch held_out = run.task->eval_set(run.config.seed, run.config.train.eval_size);
    const int positions = std::min<int>(run.task->seq_len(), static_cast<int>(model->shape.max_len));
    r = study::analyse_circuits(*model, held_out, positions, !a.no_composition);
    r.step = run.step;
  } else {
    r = study::write_circuits_files(*run.model, *run.task, run.config, a.run, run.step, !a.no_composition);
  }
  if (a.json) {
    std::printf("%s\n", findings::circuits_to_json(r, false).dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): circuits from the %sweights, DLA on %d held-out sequences\n\n", a.run.c_str(),
              static_cast<long long>(run.step), a.processed ? "processed (LayerNorms folded, centred) " : "",
              run.config.train.eval_size);
  std::printf("%s", findings::circuits_table(r).c_str());
  if (a.processed) return 0;
  std::printf("\nwrote %s, %s/*.svg and %s\n", io::layout::circuits_json(a.run).c_str(),
              io::layout::circuits_dir(a.run).c_str(), io::layout::report_html(a.run).c_str());
  return 0;
}

}  // namespace

Command add_circuits(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "circuits",
      "read the circuit from the weights: composition, copying, positional QK, direct logit attribution");
  sub->footer(
      "docs/circuits.md gives each formula. The composition baseline is the mean score of random Gaussian\n"
      "matrices of the same shapes and rank (100 pairs, fixed seed): read a score against it.");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_flag("--json", a->json, "print one JSON object instead of the tables");
  sub->add_flag("--no-composition", a->no_composition, "skip composition (needed for one-layer models)");
  sub->add_flag("--processed", a->processed,
                "read the weights as TransformerLens processes them (LayerNorms folded in, writers and "
                "unembedding centred); prints only, writes no file");
  return [a] { return run_circuits(*a); };
}

}  // namespace cli
