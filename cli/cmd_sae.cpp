// attograd sae RUN_DIR --at POINT [--config SAE.json] [--out DIR] [--resume] [--json] and attograd sae
// synthetic [...]: parse the flags into a dictionary::SaeRequest or SaeSyntheticRequest, call dictionary::sae
// or dictionary::sae_synthetic (dictionary/sae_tool.h) with the progress line and Ctrl-C's stop, and print
// the result.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/print.h"
#include "cli/progress.h"
#include "cli/stop_signal.h"
#include "cli/table_options.h"
#include "dictionary/sae_tool.h"
#include "study/fields.h"

namespace cli {

Command add_sae(CLI::App& app) {
  struct Args {
    std::string run;
    dictionary::SaeRequest request;
    bool json = false, progress = false;
  };
  struct SyntheticArgs {
    dictionary::SaeSyntheticRequest request;
    bool json = false, progress = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "sae", "train a sparse autoencoder on a model's activations at a hook point, and evaluate it");
  sub->footer(
      "Writes DIR (default RUN_DIR/sae/POINT): sae.safetensors (W_enc, b_enc, W_dec, b_dec, SAELens's "
      "names),\n"
      "checkpoint.safetensors (for --resume), eval.json, features.json and features.html. The config's "
      "fields\n"
      "and the evaluation's definitions: docs/sae.md.\n"
      "Example: attograd sae runs/text --at blocks.1.mlp.post --config configs/sae.json");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)");
  add_table_options(
      sub, study::sae_fields(), a->request,
      {{"point", {"--at", "hook point of shape (B, T, D), e.g. blocks.0.mlp.post or blocks.1.resid_post"}}});
  sub->add_flag("--json", a->json, "print eval.json's object on one line instead of the summary");
  sub->add_flag("--progress", a->progress, "show progress on stderr when it is not a terminal too");
  auto s = std::make_shared<SyntheticArgs>();
  CLI::App* syn = sub->add_subcommand(
      "synthetic",
      "an SAE on synthetic sparse features with known directions: how well it recovers them (without\n"
      "--config: TopK, k 6, lr 0.003, 3000 steps of 1024)");
  // The ranges as the command line has always said them (the same numbers as the rows').
  add_table_options(syn, study::sae_synthetic_fields(), s->request,
                    {{"features", {"", "", io::at_least(1).up_to(1 << 14)}},
                     {"dim", {"", "", io::at_least(1).up_to(1 << 14)}},
                     {"p", {"", "", io::at_least(1e-6).up_to(1.0)}},
                     {"sae_features", {"", "", io::at_least(1).up_to(1 << 16)}}});
  syn->add_flag("--json", s->json,
                "print {\"mean_max_cos\", \"mcc\", \"l0\", \"dead\", \"seconds\"} on one line");
  syn->add_flag("--progress", s->progress, "show progress on stderr when it is not a terminal too");
  return [a, s, syn] {
    // Progress on stderr for a person at a terminal (or when asked): elsewhere stderr carries only the
    // one-line error of a failing command.
    Progress progress(stderr);
    const bool tty = isatty(fileno(stderr)) != 0;
    if (syn->parsed()) {
      dictionary::SaeSyntheticRequest request = s->request;
      if (!s->json && (tty || s->progress)) request.progress = &progress;
      const auto out = dictionary::sae_synthetic(request);
      progress.finish_line();
      return print_output(s->json, out, findings::sae_synthetic_to_json(out.result), "",
                          findings::sae_synthetic_table(out.result));
    }
    if (a->run.empty()) throw UsageError("sae: give RUN_DIR (or: sae synthetic)");
    analysis::StudyRun run = analysis::open_run(a->run);
    dictionary::SaeRequest request = a->request;
    if (!a->json && (tty || a->progress)) request.progress = &progress;
    std::optional<StopOnSignal> stop(std::in_place);
    request.stop = stop->stop();
    const auto out = dictionary::sae(run, request);
    stop.reset();
    progress.finish_line();
    if (out.result.stopped) {
      const std::string again = "attograd sae " + a->run + " --at " + request.point +
                                (request.out.empty() ? "" : " --out " + request.out);
      std::fprintf(stderr, "interrupted at step %lld: checkpoint saved; continue with: %s --resume\n",
                   static_cast<long long>(out.result.steps), again.c_str());
      return 130;
    }
    return print_output(a->json, out, findings::sae_eval_to_json(out.result.eval), "",
                        findings::sae_eval_table(out.result.eval));
  };
}

}  // namespace cli
