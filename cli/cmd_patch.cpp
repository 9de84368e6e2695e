// attograd patch RUN --clean TOKENS|--clean-prompt TEXT --corrupt TOKENS|--corrupt-prompt TEXT [--answer TOK
// --wrong TOK] [--attribution] [--json]
// [--save NAME]: parses the flags into a analysis::PatchRequest, calls analysis::patch (denoising activation
// patching, analysis/patching.h) and prints its tables or JSON.
#include "analysis/patching.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "io/run_layout.h"
#include "study/fields.h"

namespace cli {

Command add_patch(CLI::App& app) {
  struct Args {
    std::string run;
    analysis::PatchRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "patch", "activation patching: which activation, at which position, carries the answer");
  sub->footer(
      "Denoising: each clean activation alone is patched into the corrupt run. The metric is\n"
      "logit[answer] - logit[wrong] at the last position; recovered = (patched - corrupt) / (clean - "
      "corrupt).\n"
      "By default answer is the model's top prediction on --clean and wrong its top prediction on "
      "--corrupt.\n"
      "Example (induction): attograd patch runs/induction --clean \"BOS 5 9 3 7 12 5\" --corrupt \"BOS 5 9 3 "
      "20 12 5\"");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  auto* clean = sub->add_option("--clean", a->request.clean.tokens,
                                "clean input as the task's token names (BOS added)");
  auto* clean_text = sub->add_option("--clean-prompt", a->request.clean.text,
                                     "clean input as text for the run's tokenizer (BOS as for --clean)");
  auto* corrupt =
      sub->add_option("--corrupt", a->request.corrupt.tokens, "corrupt input, same length as --clean");
  auto* corrupt_text = sub->add_option("--corrupt-prompt", a->request.corrupt.text,
                                       "corrupt input as text for the run's tokenizer");
  clean->excludes(clean_text);
  corrupt->excludes(corrupt_text);
  sub->add_option("--answer", a->request.answer.name,
                  "token whose logit the metric rewards (default: top on clean)");
  sub->add_option("--wrong", a->request.wrong.name,
                  "token whose logit the metric subtracts (default: top on corrupt)");
  sub->add_flag("--json", a->json, "print one JSON object instead of the tables");
  check_save_name(add_table_options(sub, study::patch_fields(), a->request).at("save"));
  return [a] {
    if (a->request.clean.empty() || a->request.corrupt.empty())
      throw UsageError("patch: give --clean or --clean-prompt, and --corrupt or --corrupt-prompt");
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::patch(run, a->request);
    const findings::PatchingResult& r = out.result;
    return print_output(a->json, out, findings::patching_to_json(r, false),
                        run_title(run) + ": patching clean activations into the corrupt run\nclean:   " +
                            join_tokens(r.clean_tokens) + "\ncorrupt: " + join_tokens(r.corrupt_tokens) +
                            "\n",
                        findings::patching_table(r) + findings::attribution_table(r));
  };
}

}  // namespace cli
