// attograd import SRC --out RUN [--family F] [--process] [--text FILE] [--json]: parses the arguments into a
// imports::ImportRequest, calls imports::import_model and prints what it wrote (docs/import.md).
#include "cli/commands.h"
#include "cli/print.h"
#include "imports/import_model.h"

namespace cli {

Command add_import(CLI::App& app) {
  struct Args {
    imports::ImportRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "import",
      "a Hugging Face model folder (GPT-2, GPT-Neo, GPT-NeoX/Pythia, Llama) as a run every tool reads");
  sub->footer(
      "Reads SRC/config.json and SRC/model.safetensors (or its sharded index; F32, F16 or BF16) and writes\n"
      "RUN/config.json, RUN/checkpoint/model.safetensors, the tokenizer files and RUN/imported.json\n"
      "(docs/import.md).\n"
      "Example: attograd import ~/models/gpt2 --out runs/gpt2 [--process]");
  imports::ImportRequest& r = a->request;
  sub->add_option("SRC", r.src, "the Hugging Face model folder")->required();
  sub->add_option("--out", r.out, "the run folder to write (new or empty)")->required();
  sub->add_option("--family", r.family, "auto (config.json's model_type), gpt2, gpt_neo, gpt_neox or llama")
      ->check(CLI::IsMember({"auto", "gpt2", "gpt_neo", "gpt_neox", "llama"}));
  sub->add_flag("--process", r.process,
                "save TransformerLens's processed weights: norms folded, writers and unembedding centred, "
                "value biases folded (docs/import.md)");
  sub->add_option(
      "--text", r.text,
      "a UTF-8 text file for the tools that draw sequences (sae, eval, circuits, detect), encoded "
      "by SRC/tokenizer.json (docs/import.md)");
  sub->add_flag("--json", a->json, "print the import's summary as one JSON line");
  return [a] {
    const auto out = imports::import_model(a->request);
    return print_output(a->json, out, findings::import_to_json(out.result), "",
                        findings::import_table(out.result));
  };
}

}  // namespace cli
