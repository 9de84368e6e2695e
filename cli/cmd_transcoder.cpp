// attograd transcoder RUN_DIR [--layers L,... | --cross-layer] [--config SAE.json] [--out DIR] [--resume]
// [--json]: parses the flags into a dictionary::TranscoderRequest, calls dictionary::transcoder
// (dictionary/transcoder.h) with the progress line and Ctrl-C's stop, and prints the evaluation.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/print.h"
#include "cli/progress.h"
#include "cli/stop_signal.h"
#include "cli/table_options.h"
#include "dictionary/transcoder.h"
#include "study/fields.h"

namespace cli {

Command add_transcoder(CLI::App& app) {
  struct Args {
    std::string run;
    dictionary::TranscoderRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "transcoder",
      "train per-layer or cross-layer transcoders (MLP input to MLP outputs) on a run, and evaluate them");
  sub->footer(
      "Writes DIR (default RUN_DIR/transcoders): L/transcoder.safetensors and L/checkpoint.safetensors per\n"
      "layer (--cross-layer: one DIR/checkpoint.safetensors), and eval.json (explained variance of each\n"
      "MLP's output, L0, dead features, CE loss recovered with every MLP replaced at once). The config is an "
      "SAE config (docs/sae.md; \"skip\": true adds a\n"
      "linear skip). docs/graphs.md says more.\n"
      "Example: attograd transcoder runs/modadd --config configs/sae/transcoder.json");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  add_table_options(sub, study::transcoder_fields(), a->request);
  sub->add_flag("--json", a->json, "print eval.json's object on one line instead of the table");
  return [a] {
    Progress progress(stderr);
    analysis::StudyRun run = analysis::open_run(a->run);
    dictionary::TranscoderRequest request = a->request;
    if (!a->json) request.progress = &progress;
    std::optional<StopOnSignal> stop(std::in_place);
    request.stop = stop->stop();
    const auto out = dictionary::transcoder(run, request);
    stop.reset();
    progress.finish_line();
    if (out.result.stopped_layer >= 0) {
      std::string again = "attograd transcoder " + a->run;
      if (!request.layers.empty()) again += " --layers " + request.layers;
      if (!request.out.empty()) again += " --out " + request.out;
      if (request.cross_layer) again += " --cross-layer";
      const std::string where =
          request.cross_layer ? std::string() : " in layer " + std::to_string(out.result.stopped_layer);
      std::fprintf(stderr, "interrupted%s at step %lld: checkpoint saved; continue with: %s --resume\n",
                   where.c_str(), static_cast<long long>(out.result.steps), again.c_str());
      return 130;
    }
    return print_output(a->json, out, findings::transcoder_eval_to_json(out.result.eval), "",
                        findings::transcoder_eval_table(out.result.eval));
  };
}

}  // namespace cli
