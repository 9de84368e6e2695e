// attograd detect RUN_DIR --pattern previous|duplicate|induction|first|FILE.json [--mode mul|abs]
// [--tokens "..." | --n N] [--json]: every head scored against a detection pattern, as TransformerLens's
// detect_head does (findings/head_detect.h), over the run's held-out sequences or one input.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "findings/head_detect.h"
#include "study/capture.h"

namespace cli {

namespace {

struct Args {
  std::string run, pattern, mode = "mul", tokens;
  int n = 0;
  bool json = false;
};

int run_detect(const Args& a) {
  findings::DetectionRule rule;
  try {
    rule = findings::detection_rule(a.pattern);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const findings::DetectMode mode = a.mode == "abs" ? findings::DetectMode::abs : findings::DetectMode::mul;
  train::LoadedRun run = load_for_study(a.run, std::nullopt, std::nullopt);
  train::Batch batch;
  bool bos_added = false;
  if (!a.tokens.empty()) {
    const std::vector<int32_t> ids = input_from_names(run, a.tokens, "--tokens", &bos_added);
    batch.B = 1;
    batch.T = static_cast<int>(ids.size());
    batch.inputs = ids;
  } else {
    batch = run.task->eval_set(run.config.seed, a.n > 0 ? a.n : run.config.train.eval_size);
  }
  const std::vector<findings::Probe> probes = study::capture_attention(*run.model, *run.task, batch);
  std::vector<findings::HeadDetection> heads;
  try {
    heads = findings::detect_heads(probes, rule, mode);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& h : heads) list.push_back({{"layer", h.layer}, {"head", h.head}, {"score", h.score}});
    const nlohmann::json j = {
        {"pattern", rule.describe()}, {"mode", a.mode}, {"sequences", batch.B}, {"heads", list}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld): heads against the %s pattern (%s), mean over %d sequence%s\n", a.run.c_str(),
              static_cast<long long>(run.step), rule.describe().c_str(), a.mode.c_str(), batch.B,
              batch.B == 1 ? "" : "s");
  if (bos_added) print_bos_added(run);
  std::vector<findings::HeadDetection> sorted = heads;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& x, const auto& y) { return x.score > y.score; });
  std::printf("\n  head    score\n");
  for (const auto& h : sorted)
    std::printf("  %-6s %6.3f\n", findings::head_name(h.layer, h.head).c_str(), h.score);
  return 0;
}

}  // namespace

Command add_detect(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "detect", "score every head against a detection pattern (TransformerLens's detect_head)");
  sub->footer(
      "mul: sum(A * D) / sum(A), the share of attention where the pattern D says; abs: 1 - mean |A - D| * "
      "T.\n"
      "A rule file holds {\"pattern\": [[...]]} (T x T), {\"offset\": k} or {\"rule\": \"induction\"}.\n"
      "Example: attograd detect runs/induction --pattern induction");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_option("--pattern", a->pattern, "previous, duplicate, induction, first, or a rule FILE.json")
      ->required();
  sub->add_option("--mode", a->mode, "mul (default) or abs")->check(CLI::IsMember({"mul", "abs"}));
  auto* tokens = sub->add_option("--tokens", a->tokens,
                                 "one input as token names (BOS added) instead of held-out sequences");
  auto* n = sub->add_option("--n", a->n, "held-out sequences (default: the config's train.eval_size)")
                ->check(CLI::PositiveNumber);
  tokens->excludes(n);
  sub->add_flag("--json", a->json,
                "print one JSON object: pattern, mode, sequences, heads [{layer, head, score}]");
  return [a] { return run_detect(*a); };
}

}  // namespace cli
