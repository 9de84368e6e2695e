// attograd detect RUN_DIR --pattern previous|duplicate|induction|first|FILE.json [--mode mul|abs]
// [--tokens "..." | --n N] [--json]: parses the flags into a analysis::DetectRequest, calls analysis::detect
// (every head scored against a detection pattern, as TransformerLens's detect_head does) and prints the
// heads by score or the JSON.
#include "analysis/detect.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_detect(CLI::App& app) {
  struct Args {
    std::string run;
    analysis::DetectRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "detect", "score every head against a detection pattern (TransformerLens's detect_head)");
  sub->footer(
      "mul: sum(A * D) / sum(A), the share of attention where the pattern D says; abs: 1 - mean |A - D| * "
      "T.\n"
      "A rule file holds {\"pattern\": [[...]]} (T x T), {\"offset\": k} or {\"rule\": \"induction\"}.\n"
      "Example: attograd detect runs/induction --pattern induction");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  auto table = add_table_options(sub, study::detect_fields(), a->request, {{"n", {"", "", io::at_least(1)}}});
  table.at("pattern")->required();
  auto* tokens = sub->add_option("--tokens", a->request.input.tokens,
                                 "one input as token names (BOS added) instead of held-out sequences");
  CLI::Option* n = table.at("n");
  auto* prompt = sub->add_option("--prompt", a->request.input.text,
                                 "one input as text for the run's tokenizer (BOS added) instead of held-out "
                                 "sequences");
  tokens->excludes(n);
  prompt->excludes(n)->excludes(tokens);
  sub->add_flag("--json", a->json,
                "print one JSON object: pattern, mode, sequences, heads [{layer, head, score}]");
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::detect(run, a->request);
    const findings::DetectResult& r = out.result;
    return print_output(a->json, out, findings::detect_to_json(r),
                        run_title(run) + ": heads against the " + r.pattern + " pattern (" + r.mode +
                            "), mean over " + std::to_string(r.sequences) + " sequence" +
                            (r.sequences == 1 ? "" : "s") + "\n",
                        findings::detect_table(r));
  };
}

}  // namespace cli
