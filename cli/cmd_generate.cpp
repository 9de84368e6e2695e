// attograd generate RUN_DIR (--prompt TEXT | --tokens T1 T2 ...) [--max-new N] [--temperature X]
// [--top-k K] [--seed S] [--json]: parses the flags into a analysis::GenerateRequest, calls
// analysis::generate (a prompt continued a token at a time through the model's key/value cache) and prints
// the text or JSON.
#include "analysis/generate.h"
#include "cli/commands.h"
#include "cli/print.h"

namespace cli {

Command add_generate(CLI::App& app) {
  struct Args {
    std::string run, prompt;
    std::vector<std::string> tokens;
    analysis::GenerateRequest request;
    bool json = false;
    CLI::Option *prompt_opt = nullptr, *tokens_opt = nullptr;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "generate", "continue a prompt with a trained model: greedy or sampled, a token at a time (KV cache)");
  sub->add_option("RUN_DIR", a->run, "run folder")->required();
  a->prompt_opt = sub->add_option("--prompt", a->prompt,
                                  "the prompt as text: the task's token names, e.g. \"3 1 4 SEP\"");
  a->tokens_opt =
      sub->add_option("--tokens", a->tokens, "the prompt as the task's token names, e.g. BOS 3 1 4 SEP");
  a->prompt_opt->excludes(a->tokens_opt);
  add_number(
      sub, "--max-new", a->request.max_new,
      "generate N tokens (at most 100000), the context sliding past max_len (default: stop at max_len)",
      io::at_least(0).up_to(analysis::kMaxNewTokens));
  add_number(sub, "--temperature", a->request.temperature,
             "0: greedy (argmax); otherwise sample softmax(logits / X)", io::at_least(0))
      ->capture_default_str();
  add_number(sub, "--top-k", a->request.top_k, "sample among the K most likely tokens only (0: all)",
             io::at_least(0))
      ->capture_default_str();
  add_number(sub, "--seed", a->request.seed, "seed of the sampling: the same seed, the same tokens")
      ->capture_default_str();
  sub->add_flag("--json", a->json,
                "print one JSON object (prompt, generated: token names; ids: prompt and generated; stopped)");
  return [a] {
    if (!a->prompt_opt->count() && !a->tokens_opt->count())
      throw UsageError("generate: give --prompt or --tokens");
    if (a->prompt_opt->count()) a->request.prompt = a->prompt;
    a->request.tokens.tokens = join_tokens(a->tokens);
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::generate(run, a->request);
    return print_output(a->json, out, findings::generate_to_json(out.result), "",
                        findings::generate_table(out.result));
  };
}

}  // namespace cli
