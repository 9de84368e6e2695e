// attograd import SRC --out RUN [--family F] [--process] [--text FILE] [--json]: parses the arguments into a
// imports::ImportRequest, calls imports::import_model and prints what it wrote (docs/import.md).
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "imports/import_model.h"
#include "study/fields.h"

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
  const auto table = add_table_options(sub, study::import_fields(), r, {{"src", {"SRC"}}});
  table.at("src")->required();
  table.at("out")->required();
  sub->add_flag("--json", a->json, "print the import's summary as one JSON line");
  return [a] {
    const auto out = imports::import_model(a->request);
    return print_output(a->json, out, findings::import_to_json(out.result), "",
                        findings::import_table(out.result));
  };
}

}  // namespace cli
