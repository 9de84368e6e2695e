// attograd compare RUN_DIR --a "..." --b "..." [--layer L] [--head H] [--svg FILE]: two inputs of the same
// length through one model. Per head: A's map, B's map and their signed difference A - B side by side,
// then each head's total variation distance between the two maps (mean over query rows of
// 0.5 * sum_j |A[i][j] - B[i][j]|: 0 when the head looks the same way on both, 1 when it looks at disjoint
// keys), most changed first, so the heads that respond to the change stand out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/study_input.h"
#include "findings/ascii_heatmap.h"
#include "findings/svg_heatmap.h"
#include "findings/utf8_label.h"
#include "io/atomic_file.h"

namespace cli {

namespace {

struct Args {
  std::string run, a, b, svg;
  LayerHeadOptions pick;
};

double total_variation(const findings::AttentionWeights& a, const findings::AttentionWeights& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double row = 0;
    for (size_t j = 0; j < a[i].size(); ++j) row += std::fabs(static_cast<double>(a[i][j]) - b[i][j]);
    sum += 0.5 * row;
  }
  return a.empty() ? 0.0 : sum / static_cast<double>(a.size());
}

float max_abs(const findings::AttentionWeights& w) {
  float m = 0;
  for (const auto& row : w)
    for (float v : row) m = std::max(m, std::fabs(v));
  return m;
}

std::string fmt3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A rendered panel without its row labels (drawn once, at the left) and without its legend lines.
// The renderers put a one-column label and a space before each row when the labels are empty.
std::vector<std::string> bare_panel(const std::string& title, const std::string& text, int rows) {
  std::vector<std::string> lines{title};
  for (const std::string& line : text_lines(text, rows + 1))
    lines.push_back(line.size() >= 2 ? line.substr(2) : "");
  return lines;
}

int run_compare(const Args& args) {
  const std::optional<int> layer = args.pick.layer(), head = args.pick.head();
  train::LoadedRun run = load_for_study(args.run, layer, head);
  bool bos_a = false, bos_b = false;
  const std::vector<int32_t> a = input_from_names(run, args.a, "--a", &bos_a);
  const std::vector<int32_t> b = input_from_names(run, args.b, "--b", &bos_b);
  if (a.size() != b.size())
    throw UsageError(
        "--a has " + std::to_string(a.size()) + " tokens but --b has " + std::to_string(b.size()) +
        ((bos_a || bos_b) ? " (counting the BOS put in front)" : "") +
        ": compare needs two inputs of the same length, to line their maps up position by position");
  const std::vector<findings::Probe> probes = probe_inputs(run, {a, b});
  const findings::Probe pa = select_maps(probes[0], layer, head), pb = select_maps(probes[1], layer, head);
  const int T = static_cast<int>(a.size());

  std::printf("%s (step %lld), %s task, %d tokens\n  A: %s\n  B: %s\n", args.run.c_str(),
              static_cast<long long>(run.step), run.config.task.kind.c_str(), T,
              join_tokens(pa.tokens).c_str(), join_tokens(pb.tokens).c_str());
  if (bos_a || bos_b) print_bos_added(run);

  // Row labels once at the left (after each panel's title and column-label lines): the token where A and B
  // agree, "a/b" where they differ. A - B's columns show the agreed token, or '*' where they differ.
  std::vector<std::string> labels{"", ""}, diff_cols;
  int label_w = 1;
  for (int i = 0; i < T; ++i) {
    const bool same = pa.tokens[i] == pb.tokens[i];
    labels.push_back(same ? pa.tokens[i] : pa.tokens[i] + "/" + pb.tokens[i]);
    diff_cols.push_back(same ? pa.tokens[i] : "*");
    label_w = std::max(label_w, findings::display_width(labels.back()));
  }
  for (std::string& l : labels) l.insert(0, static_cast<size_t>(label_w - findings::display_width(l)), ' ');

  // Cells: A and B one to three columns, A - B twice that (it needs a sign), all within ~78 columns.
  const int budget = 78 - label_w - 6;
  const int cell = std::clamp(budget / std::max(1, 4 * T), 1, 3);
  findings::AsciiOptions ab, diff;
  ab.mark_future = diff.mark_future = true;
  ab.width = 2 + T * cell;
  diff.width = 2 + T * 2 * cell;
  const std::vector<std::string> none(static_cast<size_t>(T), "");

  struct Change {
    int layer, head;
    double tv;
  };
  std::vector<Change> changes;
  for (size_t k = 0; k < pa.maps.size(); ++k) {
    const findings::HeadMap& ma = pa.maps[k];
    const findings::HeadMap& mb = pb.maps[k];
    const double tv = total_variation(ma.weights, mb.weights);
    changes.push_back({ma.layer, ma.head, tv});
    float dmax = 0;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) dmax = std::max(dmax, std::fabs(ma.weights[i][j] - mb.weights[i][j]));
    std::printf("\n%s   total variation %s\n", findings::head_name(ma.layer, ma.head).c_str(),
                fmt3(tv).c_str());
    std::printf(
        "%s", side_by_side(
                  {labels,
                   bare_panel("A max " + fmt3(max_abs(ma.weights)),
                              findings::ascii_heatmap(ma.weights, none, pa.tokens, ab), T),
                   bare_panel("B max " + fmt3(max_abs(mb.weights)),
                              findings::ascii_heatmap(mb.weights, none, pb.tokens, ab), T),
                   bare_panel("A - B max " + fmt3(dmax),
                              findings::ascii_difference(ma.weights, mb.weights, none, diff_cols, diff), T)},
                  2)
                  .c_str());
  }
  std::printf(
      "\nlevels of each panel's max: ' '<20%% %s<40%% %s<60%% %s<80%% %s<=100%%; · masked (future key)\n",
      findings::heat_glyph(1), findings::heat_glyph(2), findings::heat_glyph(3), findings::heat_glyph(4));
  std::printf(
      "A - B: +%s where A looks more, -%s where B looks more; rows and columns marked a/b or * differ\n",
      findings::heat_glyph(4), findings::heat_glyph(4));

  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& x, const Change& y) { return x.tv > y.tv; });
  std::printf("\ntotal variation between A's and B's maps (0: same map, 1: disjoint), most changed first\n");
  for (const Change& c : changes) {
    std::string bar;
    for (int k = 0; k < static_cast<int>(std::lround(c.tv * 40)); ++k) bar += findings::heat_glyph(4);
    std::printf("  %-6s %s  %s\n", findings::head_name(c.layer, c.head).c_str(), fmt3(c.tv).c_str(),
                bar.c_str());
  }
  if (!args.svg.empty()) {
    findings::SvgOptions svg;
    svg.title = run.config.name + ", step " + std::to_string(run.step) + ": A = " + join_tokens(pa.tokens) +
                ", B = " + join_tokens(pb.tokens);
    io::write_user_file(args.svg, findings::svg_compare(pa, pb, svg));
    std::printf("\nwrote %s\n", args.svg.c_str());
  }
  return 0;
}

}  // namespace

Command add_compare(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare", "two inputs of the same length, one model: each head's maps side by side and A - B");
  sub->footer(
      "Tokens are the task's names (BOS, SEP, 0, 1, ...). When the task has a BOS token and an input does\n"
      "not start with it, BOS is put in front and one line says so. Total variation per head: the mean over\n"
      "query rows of 0.5 * sum |A - B| (0: the head looks the same way on both inputs, 1: at disjoint "
      "keys).\n"
      "Example: attograd compare runs/reverse --a \"3 1 4 1 5 9 2 6 SEP\" --b \"3 1 4 1 5 9 2 7 SEP\"");
  sub->add_option("RUN_DIR", a->run, "run folder (from attograd train)")->required();
  sub->add_option("--a", a->a, "first input, as the task's token names")->required();
  sub->add_option("--b", a->b, "second input, as many tokens as --a")->required();
  a->pick.add_to(sub);
  sub->add_option("--svg", a->svg, "also write A, B and A - B per head as an SVG picture to FILE");
  return [a] { return run_compare(*a); };
}

}  // namespace cli
