// attograd generate RUN_DIR (--prompt TEXT | --tokens T1 T2 ...) [--max-new N] [--temperature X]
// [--top-k K] [--seed S] [--no-bos] [--json]: parses the flags into a analysis::GenerateRequest, calls
// analysis::generate (a prompt continued a token at a time through the model's key/value cache) and prints
// the text or JSON.
#include "analysis/generate.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_generate(CLI::App& app) {
  struct Args {
    std::string run, prompt;
    std::vector<std::string> tokens;
    analysis::GenerateRequest request;
    bool json = false, no_bos = false;
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
  // --prompt is the prompt row's own (it excludes --tokens, an input); on the command line -1 is not a
  // --max-new value but what leaving it out means.
  add_table_options(sub, study::generate_fields(), a->request,
                    {{"max_new", {"", "", io::at_least(0).up_to(analysis::kMaxNewTokens)}},
                     {"temperature", {"", "", io::at_least(0)}},
                     {"top_k", {"", "", io::at_least(0)}}},
                    {"prompt", "prepend_bos"});
  // --no-bos says the prepend_bos row the command line's way round (TransformerLens's prepend_bos=False).
  sub->add_flag("--no-bos", a->no_bos,
                "take the prompt as given: no BOS put in front (an imported GPT-2's is <|endoftext|>)");
  sub->add_flag("--json", a->json,
                "print one JSON object (prompt, generated: token names; ids: prompt and generated; stopped)");
  return [a] {
    if (!a->prompt_opt->count() && !a->tokens_opt->count())
      throw UsageError("generate: give --prompt or --tokens");
    if (a->prompt_opt->count()) a->request.prompt = a->prompt;
    a->request.prepend_bos = !a->no_bos;
    a->request.tokens.tokens = join_tokens(a->tokens);
    analysis::StudyRun run = analysis::open_run(a->run);
    const auto out = analysis::generate(run, a->request);
    return print_output(a->json, out, findings::generate_to_json(out.result), "",
                        findings::generate_table(out.result));
  };
}

}  // namespace cli
