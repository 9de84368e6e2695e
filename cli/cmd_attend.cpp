// attograd attend RUN_DIR (--tokens "3 1 4" | --ids "0 5 3 6") [--layer L] [--head H] [--svg FILE]:
// where each head of a trained model looks on one input, as ASCII heatmaps in the lesson's five levels.
// By default every head compactly (findings::ascii_grid); --layer and/or --head pick heads, each drawn full
// size with its weight table. --svg writes the selected heads as a self-contained picture.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "findings/ascii_heatmap.h"
#include "findings/svg_heatmap.h"
#include "io/atomic_file.h"

namespace cli {

namespace {

struct Args {
  std::string run, tokens, ids, svg;
  LayerHeadOptions pick;
};

int run_attend(const Args& a) {
  const std::optional<int> layer = a.pick.layer(), head = a.pick.head();
  train::LoadedRun run = load_for_study(a.run, layer, head);
  bool bos_added = false;
  const std::vector<int32_t> ids = !a.tokens.empty() ? input_from_names(run, a.tokens, "--tokens", &bos_added)
                                                     : input_from_ids(run, a.ids, "--ids");
  const findings::Probe probe = select_maps(probe_inputs(run, {ids}).front(), layer, head);
  const int T = static_cast<int>(ids.size());

  std::printf("%s (step %lld), %s task, %d tokens: %s\n", a.run.c_str(), static_cast<long long>(run.step),
              run.config.task.kind.c_str(), T, join_tokens(probe.tokens).c_str());
  if (bos_added) print_bos_added(run);
  findings::AsciiOptions opts;
  opts.mark_future = true;  // causal model: keys after the query are masked, not merely unattended
  if (!layer && !head) {
    std::printf("\nevery head (rows: where each query token looks, columns: key tokens)\n%s",
                findings::ascii_grid(probe, opts).c_str());
  } else {
    for (const findings::HeadMap& m : probe.maps) {
      std::printf("\nlayer %d head %d (rows: where each query token looks, columns: key tokens)\n%s", m.layer,
                  m.head, findings::ascii_heatmap(m.weights, probe.tokens, probe.tokens, opts).c_str());
      std::printf("\nweights (row i: how query i splits its attention; rows sum to 1)\n%s",
                  findings::weight_table(m.weights, probe.tokens, probe.tokens).c_str());
    }
  }
  if (!a.svg.empty()) {
    findings::SvgOptions svg;
    svg.title = run.config.name + ", step " + std::to_string(run.step) + ": " + join_tokens(probe.tokens);
    io::write_user_file(a.svg, findings::svg_attention_grid(probe, svg));
    std::printf("\nwrote %s\n", a.svg.c_str());
  }
  return 0;
}

}  // namespace

Command add_attend(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("attend", "ASCII heatmaps of where each head of a trained model looks on one input");
  sub->footer(
      "Tokens are the task's names as `attograd forward` prints them (BOS, SEP, 0, 1, ...). When the task\n"
      "has a BOS token and --tokens does not start with it, BOS is put in front (the model never saw an\n"
      "input without it) and one line says so. --ids are taken exactly as given.\n"
      "Example: attograd attend runs/reverse --tokens \"3 1 4 1 5 9 2 6 SEP 6 2 9\" --layer 1 --head 0");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  auto* tokens =
      sub->add_option("--tokens", a->tokens, "input as the task's token names, e.g. \"3 1 4\" (BOS added)");
  auto* ids = sub->add_option("--ids", a->ids, "input as raw token ids, e.g. \"0 5 3 6\" (taken as given)");
  tokens->excludes(ids);
  a->pick.add_to(sub, "; full-size heatmaps");
  sub->add_option("--svg", a->svg, "also write the shown heads as an SVG picture to FILE");
  return [a] {
    if (a->tokens.empty() && a->ids.empty()) throw UsageError("attend: give --tokens or --ids");
    return run_attend(*a);
  };
}

}  // namespace cli
