// attograd lens RUN_DIR (--tokens "..." | --ids "...") [--answer TOK [--wrong TOK]] [--json] [--save NAME]:
// the logit lens on the accumulated residual stream and the decomposition of the metric into the
// components that wrote it (study/residual.h), at every position.
#include <cstdio>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "study/residual.h"
#include "study/run_study.h"
#include "train/token_input.h"

namespace cli {

namespace {

struct Args {
  std::string run, tokens, ids, answer, wrong, save;
  bool json = false;
};

int token_arg(const train::LoadedRun& run, const std::string& name, const std::string& argument) {
  const std::optional<int> id = run.task->token_id(name);
  if (!id) throw UsageError(argument + ": unknown token '" + name + "'");
  return *id;
}

int run_lens(const Args& a) {
  if (a.tokens.empty() && a.ids.empty()) throw UsageError("lens: give --tokens or --ids");
  if (!a.wrong.empty() && a.answer.empty()) throw UsageError("--wrong needs --answer");
  train::LoadedRun run = load_for_study(a.run, std::nullopt, std::nullopt);
  bool bos_added = false;
  const std::vector<int32_t> ids = !a.tokens.empty() ? input_from_names(run, a.tokens, "--tokens", &bos_added)
                                                     : input_from_ids(run, a.ids, "--ids");
  int answer = 0, wrong = -1;
  if (!a.answer.empty()) {
    answer = token_arg(run, a.answer, "--answer");
    if (!a.wrong.empty()) wrong = token_arg(run, a.wrong, "--wrong");
    if (answer == wrong) throw UsageError("--answer and --wrong are the same token '" + a.answer + "'");
  } else {
    ag::NoGradScope no_grad;  // the model's top prediction at the last position
    const int64_t T = static_cast<int64_t>(ids.size());
    const ag::Tensor<float> logits = run.model->forward(ids, 1, T);
    const int64_t V = logits.size(2);
    const float* row = logits.data() + (T - 1) * V;
    answer = static_cast<int>(std::max_element(row, row + V) - row);
  }
  findings::LensResult r = study::logit_lens(*run.model, ids, answer, wrong);
  auto name_of = [&](int id) {
    return id < run.task->vocab_size() ? run.task->token_name(id) : "<id " + std::to_string(id) + ">";
  };
  for (int id : ids) r.positions.push_back(name_of(id));
  r.answer_token = name_of(answer);
  r.wrong_token = wrong < 0 ? "mean" : name_of(wrong);

  if (!a.save.empty()) {
    const io::RunLock lock(a.run);  // one writer per run folder
    const std::string stem = io::layout::lens_stem(a.run, a.save);
    io::write_text_file_atomically(stem + ".json", findings::lens_to_json(r, true).dump(1) + "\n");
    io::write_text_file_atomically(
        stem + ".svg", findings::svg_lens(r, run.config.name + ", step " + std::to_string(run.step) +
                                                 ": logit lens '" + a.save + "'"));
    study::write_run_report(a.run, run.config.name);
  }
  if (a.json) {
    std::printf("%s\n", findings::lens_to_json(r, false).dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): logit lens and residual decomposition\ninput: %s\n", a.run.c_str(),
              static_cast<long long>(run.step), join_tokens(r.positions).c_str());
  if (bos_added) print_bos_added(run);
  std::printf("%s", findings::lens_table(r).c_str());
  if (!a.save.empty())
    std::printf("\nwrote %s.json, .svg and %s\n", io::layout::lens_stem(a.run, a.save).c_str(),
                io::layout::report_html(a.run).c_str());
  return 0;
}

}  // namespace

Command add_lens(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "lens",
      "logit lens and residual decomposition: where in the stream the answer appears, and who wrote it");
  sub->footer(
      "The metric at each position is logit[answer] - logit[wrong], or logit[answer] minus the mean logit\n"
      "without --wrong. Accumulated: each layer's resid_pre and the last resid_post through ln_f (with the\n"
      "actual forward's scale) and the unembedding. Components: embed, pos_embed, each head, each attention\n"
      "bias, each MLP, ln_f.bias and lm_head.bias; at each position they sum to the actual metric.\n"
      "Example (induction): attograd lens runs/induction --tokens \"BOS 5 9 3 7 12 5\" --answer 9");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  auto* tokens = sub->add_option("--tokens", a->tokens, "input as the task's token names (BOS added)");
  auto* ids = sub->add_option("--ids", a->ids, "input as raw token ids, taken as given");
  tokens->excludes(ids);
  sub->add_option("--answer", a->answer,
                  "token whose logit the metric rewards (default: the top prediction at the last position)");
  sub->add_option("--wrong", a->wrong, "token whose logit the metric subtracts (default: the mean logit)");
  sub->add_flag("--json", a->json, "print one JSON object instead of the table");
  sub->add_option(
         "--save", a->save,
         "also write " + io::layout::lens_stem("RUN", "NAME") + ".json and .svg (and rebuild report.html)")
      ->check(check_save_name);
  return [a] { return run_lens(*a); };
}

}  // namespace cli
