// attograd patch RUN --clean TOKENS --corrupt TOKENS [--answer TOK --wrong TOK] [--attribution] [--json]
// [--save NAME]: denoising activation patching. Runs the corrupt input with one clean activation patched in
// at a time (resid_pre per layer and position, the last resid_post, every head's z per position and at all
// positions, q, k and v per head and position, each head's pattern) and prints how much of the clean logit
// difference each patch recovers; with --attribution, attribution patching's estimates beside them.
#include <cstdio>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/patching.h"
#include "study/run_study.h"

namespace cli {

namespace {

// The longest --save NAME: NAME.json and NAME.svg stay well within a file name's 255 bytes.

struct Args {
  std::string run, clean, corrupt, answer, wrong, save;
  bool json = false, attribution = false;
};

int token_arg(const train::LoadedRun& run, const std::string& name, const std::string& argument) {
  const std::optional<int> id = run.task->token_id(name);
  if (!id) throw UsageError(argument + ": unknown token '" + name + "'");
  return *id;
}

int run_patch(const Args& a) {
  train::LoadedRun run = load_for_study(a.run, std::nullopt, std::nullopt);
  bool bos_clean = false, bos_corrupt = false;
  const std::vector<int32_t> clean = input_from_names(run, a.clean, "--clean", &bos_clean);
  const std::vector<int32_t> corrupt = input_from_names(run, a.corrupt, "--corrupt", &bos_corrupt);
  if (clean.size() != corrupt.size())
    throw UsageError("--clean has " + std::to_string(clean.size()) + " tokens but --corrupt has " +
                     std::to_string(corrupt.size()) + "; patching needs inputs of the same length");
  if (a.answer.empty() != a.wrong.empty()) throw UsageError("give both --answer and --wrong, or neither");
  int answer = 0, wrong = 0;
  if (!a.answer.empty()) {
    answer = token_arg(run, a.answer, "--answer");
    wrong = token_arg(run, a.wrong, "--wrong");
    if (answer == wrong) throw UsageError("--answer and --wrong are the same token '" + a.answer + "'");
  } else {
    const int top_clean = study::top_prediction(*run.model, clean);
    const int top_corrupt = study::top_prediction(*run.model, corrupt);
    if (top_clean == top_corrupt)
      throw UsageError(
          "the model predicts '" + run.task->token_name(top_clean) +
          "' after both --clean and --corrupt, so the default metric is 0; give --answer and --wrong");
    answer = top_clean;
    wrong = top_corrupt;
  }
  findings::PatchingResult r = study::activation_patching(*run.model, clean, corrupt, answer, wrong);
  if (a.attribution) r.attribution = study::attribution_patching(*run.model, clean, corrupt, answer, wrong);
  for (int id : clean) r.clean_tokens.push_back(run.task->token_name(id));
  for (int id : corrupt) r.corrupt_tokens.push_back(run.task->token_name(id));
  r.answer_token = run.task->token_name(answer);
  r.wrong_token = run.task->token_name(wrong);

  if (!a.save.empty()) {
    const io::RunLock lock(a.run);  // one writer per run folder
    const std::string stem = io::layout::patching_stem(a.run, a.save);
    findings::write_patching(stem + ".json", r);
    io::write_text_file_atomically(
        stem + ".svg", findings::svg_patching(r, run.config.name + ", step " + std::to_string(run.step) +
                                                     ": activation patching '" + a.save + "'"));
    study::write_run_report(a.run, run.config.name);
  }
  if (a.json) {
    std::printf("%s\n", findings::patching_to_json(r, false).dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): patching clean activations into the corrupt run\n", a.run.c_str(),
              static_cast<long long>(run.step));
  std::printf("clean:   %s\ncorrupt: %s\n", join_tokens(r.clean_tokens).c_str(),
              join_tokens(r.corrupt_tokens).c_str());
  if (bos_clean || bos_corrupt) print_bos_added(run);
  std::printf("%s", findings::patching_table(r).c_str());
  std::printf("%s", findings::attribution_table(r).c_str());
  if (!a.save.empty())
    std::printf("\nwrote %s.json, .svg and %s\n", io::layout::patching_stem(a.run, a.save).c_str(),
                io::layout::report_html(a.run).c_str());
  return 0;
}

}  // namespace

Command add_patch(CLI::App& app) {
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
  sub->add_option("--clean", a->clean, "clean input as the task's token names (BOS added)")->required();
  sub->add_option("--corrupt", a->corrupt, "corrupt input, same length as --clean")->required();
  sub->add_option("--answer", a->answer, "token whose logit the metric rewards (default: top on clean)");
  sub->add_option("--wrong", a->wrong, "token whose logit the metric subtracts (default: top on corrupt)");
  sub->add_flag("--attribution", a->attribution,
                "also estimate every patch from one corrupt backward (attribution patching) and print the "
                "correlation per activation kind");
  sub->add_flag("--json", a->json, "print one JSON object instead of the tables");
  sub->add_option("--save", a->save,
                  "also write " + io::layout::patching_stem("RUN", "NAME") +
                      ".json and .svg (and rebuild report.html)")
      ->check(check_save_name);
  return [a] { return run_patch(*a); };
}

}  // namespace cli
