// attograd generate RUN_DIR (--prompt TEXT | --tokens T1 T2 ...) [--max-new N] [--temperature X]
// [--top-k K] [--seed S] [--json]: continues a prompt a token at a time (nn/generate.h), each token drawn
// from the last position's logits and read in turn through the model's key/value cache.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "nn/generate.h"
#include "train/run_folder.h"
#include "train/token_input.h"

namespace cli {

namespace {

// --- How a task's text becomes ids and ids become text: the two places a task kind with its own notion
// of text (a character-level text task) plugs in. For the built-in tasks a prompt is token names separated
// by white space, and tokens are shown by name, separated by spaces.

// The ids of a --prompt string, before BOS is put in front; throws std::invalid_argument (one line, naming
// --prompt) for an unknown token or an empty prompt.
std::vector<int32_t> prompt_ids(const train::Task& task, const std::string& text) {
  try {
    if (std::optional<std::vector<int32_t>> ids = task.encode_text(text)) return *ids;  // a text model
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--prompt: " + std::string(e.what()));
  }
  return train::parse_token_names(task, text, "--prompt");
}

// A token's name; a model whose vocabulary is larger than the task's (model.vocab) may draw an id the task
// never uses, shown as "<id N>".
std::string token_name(const train::Task& task, int32_t id) {
  return id < task.vocab_size() ? task.token_name(id) : "<id " + std::to_string(id) + ">";
}

std::vector<std::string> token_names(const train::Task& task, const std::vector<int32_t>& ids) {
  std::vector<std::string> names;
  for (int32_t id : ids) names.push_back(token_name(task, id));
  return names;
}

// How the text output shows a run of tokens.
std::string ids_text(const train::Task& task, const std::vector<int32_t>& ids) {
  const bool in_vocabulary =
      std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id < task.vocab_size(); });
  // A text model prints its text; the other kinds their token names joined by spaces.
  return in_vocabulary ? task.decode(ids) : join_tokens(token_names(task, ids));
}

struct Args {
  std::string run, prompt;
  std::vector<std::string> tokens;
  int64_t max_new = -1;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool json = false;
  CLI::Option *prompt_opt = nullptr, *tokens_opt = nullptr, *max_new_opt = nullptr;
};

void check_args(const Args& a) {
  if (!a.prompt_opt->count() && !a.tokens_opt->count())
    throw UsageError("generate: give --prompt or --tokens");
  // Each token past the window costs a full forward: the work is bounded up front.
  constexpr int64_t kMaxNew = 100000;
  if (a.max_new_opt->count() && (a.max_new < 0 || a.max_new > kMaxNew))
    throw UsageError("--max-new " + std::to_string(a.max_new) + ": must be in 0.." + std::to_string(kMaxNew));
  if (!std::isfinite(a.temperature) || a.temperature < 0)
    throw UsageError("--temperature " + std::to_string(a.temperature) +
                     ": must be a finite number >= 0 (0 = greedy)");
  if (a.top_k < 0)
    throw UsageError("--top-k " + std::to_string(a.top_k) + ": must be >= 0 (0 = every token)");
}

int run_generate(const Args& a) {
  check_args(a);
  train::LoadedRun run = load_for_study(a.run, std::nullopt, std::nullopt);
  const train::Task& task = *run.task;
  const std::string argument = a.tokens_opt->count() ? "--tokens" : "--prompt";
  std::vector<int32_t> prompt;
  bool bos_added = false;
  if (a.tokens_opt->count()) {
    prompt = input_from_names(run, join_tokens(a.tokens), argument, &bos_added);
  } else {
    prompt = prompt_ids(task, a.prompt);
    if (prompt.empty()) throw UsageError("--prompt: expected at least one token");
    // As input_from_names: every sequence of a task with BOS starts with it.
    const std::optional<int> bos = task.token_id("BOS");
    bos_added = bos && prompt.front() != *bos;
    if (bos_added) prompt.insert(prompt.begin(), *bos);
    check_input_length(run, prompt.size(), argument);
  }

  nn::GenerateOptions o;
  if (a.max_new_opt->count()) o.max_new = a.max_new;
  o.sampling.temperature = a.temperature;
  o.sampling.top_k = a.top_k;
  o.seed = a.seed;
  const nn::Generation g = nn::generate(*run.model, prompt, o);

  if (a.json) {
    std::vector<int32_t> ids = prompt;
    ids.insert(ids.end(), g.ids.begin(), g.ids.end());
    const nlohmann::json j = {{"prompt", token_names(task, prompt)},
                              {"generated", token_names(task, g.ids)},
                              {"ids", ids},
                              {"stopped", nn::stop_reason_name(g.stopped)}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  if (bos_added) print_bos_added(run);
  std::printf("prompt:    %s\ngenerated: %s\n", ids_text(task, prompt).c_str(),
              ids_text(task, g.ids).c_str());
  if (g.stopped == nn::StopReason::max_len)
    std::printf("stopped: max_len (the model reads at most %lld tokens)\n",
                static_cast<long long>(run.model->shape.max_len));
  else
    std::printf("stopped: max_new (%lld tokens)\n", static_cast<long long>(g.ids.size()));
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "generate", "continue a prompt with a trained model: greedy or sampled, a token at a time (KV cache)");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  a->prompt_opt = sub->add_option("--prompt", a->prompt,
                                  "the prompt as text: the task's token names, e.g. \"3 1 4 SEP\"");
  a->tokens_opt =
      sub->add_option("--tokens", a->tokens, "the prompt as the task's token names, e.g. BOS 3 1 4 SEP");
  a->prompt_opt->excludes(a->tokens_opt);
  a->max_new_opt = sub->add_option(
      "--max-new", a->max_new,
      "generate N tokens (at most 100000), the context sliding past max_len (default: stop at max_len)");
  sub->add_option("--temperature", a->temperature, "0: greedy (argmax); otherwise sample softmax(logits / X)")
      ->capture_default_str();
  sub->add_option("--top-k", a->top_k, "sample among the K most likely tokens only (0: all)")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the sampling: the same seed, the same tokens")
      ->check(CLI::Validator(
          [](std::string& v) { return v.rfind('-', 0) == 0 ? std::string("must be an integer >= 0") : ""; },
          "", "non-negative"))
      ->capture_default_str();
  sub->add_flag("--json", a->json,
                "print one JSON object (prompt, generated: token names; ids: prompt and generated; stopped)");
  return [a] { return run_generate(*a); };
}

}  // namespace cli
