// attograd graph RUN_DIR (--tokens "..." | --ids "...") [--target TOK] [--transcoders DIR]
// [--node-threshold X] [--edge-threshold X] [--qk L.H.K] [--save NAME] [--json]: parses the flags into a
// attribution::GraphRequest, calls attribution::graph (attribution/graph.h) and prints its summary or
// graph.json's object.
#include "attribution/graph.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "io/run_layout.h"
#include "study/fields.h"

namespace cli {

Command add_graph(CLI::App& app) {
  struct Args {
    std::string run;
    InputOptions input;
    attribution::GraphRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "graph", "the attribution graph of one prompt: exact direct effects, in float64, pruned by influence");
  sub->footer(
      "The local replacement model freezes the prompt's attention patterns and norm scales and replaces "
      "each\n"
      "MLP by its transcoder's active features plus an error node per layer and position (attograd\n"
      "transcoder trains them; an attention-only model needs none). Writes RUN_DIR/graphs/NAME/graph.json\n"
      "(Neuronpedia's graph schema), adjacency.npy (the unpruned matrix, float64) and graph.html (the\n"
      "viewer: one offline page, re-pruned by its sliders). docs/graphs.md.\n"
      "Example: attograd graph runs/modadd --tokens \"BOS 3 5 =\"");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  a->input.add_to(sub, "the prompt as the task's token names (BOS added)");
  sub->add_option("--target", a->request.target.name,
                  "the one target logit (default: the most likely, up to cumulative p 0.95, at most 10)");
  const auto table = add_table_options(sub, study::graph_fields(), a->request);
  check_save_name(table.at("save"));
  sub->add_flag("--json", a->json, "print graph.json's object on one line instead of the summary");
  return [a] {
    analysis::StudyRun run = analysis::open_run(a->run);
    a->request.input = a->input.sequence("graph", run);
    const auto out = attribution::graph(run, a->request);
    return print_output(
        a->json, out, findings::graph_to_json(out.result),
        run_title(run) + ": attribution graph\ninput: " + join_tokens(out.result.prompt_tokens) + "\n",
        findings::graph_table(out.result));
  };
}

}  // namespace cli
