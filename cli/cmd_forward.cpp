// attograd forward RUN_DIR (--tokens "BOS 3 1 4" | --ids "0 5 3 6") [--json]: one input through the model:
// logits, the predicted next token at every position, and every layer's and head's attention weights.
#include <cstdio>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "findings/ascii_heatmap.h"
#include "train/evaluate.h"
#include "train/run_folder.h"
#include "train/token_input.h"

namespace cli {

namespace {

// The task's name of a predicted id; a model whose vocabulary is larger than the task's (model.vocab) may
// predict an id the task never uses, shown as "<id N>".
std::string prediction_name(const train::Task& task, int32_t id) {
  return id < task.vocab_size() ? task.token_name(id) : "<id " + std::to_string(id) + ">";
}

struct Args {
  std::string run, tokens, ids;
  bool json = false;
};

int run_forward(const Args& a) {
  train::LoadedRun run = train::load_run(a.run);
  // Taken as given, BOS or not: forward shows what the model does on exactly this input.
  const std::vector<int32_t> ids = !a.tokens.empty()
                                       ? train::parse_token_names(*run.task, a.tokens, "--tokens")
                                       : train::parse_token_ids(run.task->vocab_size(), a.ids, "--ids");
  check_input_length(run, ids.size(), a.tokens.empty() ? "--ids" : "--tokens");
  const int T = static_cast<int>(ids.size());
  ag::Tensor<float> logits;  // (1, T, V), from the same forward pass as the maps
  const findings::Probe probe = probe_inputs(run, {ids}, &logits).front();
  const int64_t V = logits.size(-1);
  std::vector<int32_t> predictions;
  for (int t = 0; t < T; ++t) {
    const float* row = logits.data() + t * V;
    predictions.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
  }
  if (a.json) {
    nlohmann::json j;
    j["ids"] = ids;
    j["tokens"] = probe.tokens;
    nlohmann::json rows = nlohmann::json::array();
    for (int t = 0; t < T; ++t)
      rows.push_back(std::vector<float>(logits.data() + t * V, logits.data() + (t + 1) * V));
    j["logits"] = rows;
    j["predictions"] = predictions;
    nlohmann::json att = nlohmann::json::array();
    for (const findings::HeadMap& m : probe.maps)
      att.push_back({{"layer", m.layer}, {"head", m.head}, {"weights", m.weights}});
    j["attention"] = att;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s (step %lld), %d tokens\n\n  pos  token  ->  predicted next\n", a.run.c_str(),
              static_cast<long long>(run.step), T);
  for (int t = 0; t < T; ++t)
    std::printf("  %3d  %-5s  ->  %s\n", t, probe.tokens[t].c_str(),
                prediction_name(*run.task, predictions[t]).c_str());
  findings::AsciiOptions opts;
  opts.mark_future = true;
  std::printf("\nattention (rows: query tokens, columns: key tokens)\n%s",
              findings::ascii_grid(probe, opts).c_str());
  return 0;
}

}  // namespace

Command add_forward(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("forward", "one input through a trained model: logits, predictions, attention");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  auto* tokens =
      sub->add_option("--tokens", a->tokens, "input as the task's token names, e.g. \"BOS 3 1 4\"");
  auto* ids = sub->add_option("--ids", a->ids, "input as raw token ids, e.g. \"0 5 3 6\"");
  tokens->excludes(ids);
  sub->add_flag("--json", a->json, "print one JSON object (ids, tokens, logits, predictions, attention)");
  return [a] {
    if (a->tokens.empty() && a->ids.empty()) throw UsageError("forward: give --tokens or --ids");
    return run_forward(*a);
  };
}

}  // namespace cli
