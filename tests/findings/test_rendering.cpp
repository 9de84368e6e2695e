// Pictures of attention maps: the ASCII levels and widths, SVG well-formedness, labels, legend and
// escaping, the attention dump JSON round trip and its errors, the report's compact map encoding, log
// ticks and inline SVG ids, report.html at a shipped config's size being self-contained and in budget, the
// report's SAE section (eval.json's numbers, the density histogram, the link; absent without SAEs) and
// eval.json's errors, and an SAE's features.html (a window around each peak, in budget at the text SAE's
// size).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/head_scores.h"
#include "findings/ascii_heatmap.h"
#include "findings/attention_maps.h"
#include "findings/chart_scale.h"
#include "findings/phase_change.h"
#include "findings/report_circuits.h"
#include "findings/report_html.h"
#include "findings/report_sae.h"
#include "findings/sae_view.h"
#include "findings/svg_heatmap.h"
#include "findings/svg_matrix.h"
#include "findings/sweep_summary.h"
#include "findings/utf8_label.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"

using namespace findings;

namespace {

const std::string kBlank = " ", kLight = "\u2591", kMedium = "\u2592", kDark = "\u2593", kFull = "\u2588";

AttentionWeights uniform_causal(int T) {
  AttentionWeights w(T, std::vector<float>(T, 0.0f));
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) w[i][j] = 1.0f / (i + 1);
  return w;
}

// T=17 tokens, some long, as in a reverse task probe; n_layers x n_heads uniform maps with a twist per head.
Probe probe_17(int layers, int heads) {
  Probe p;
  for (int t = 0; t < 17; ++t) {
    p.ids.push_back(t % 7);
    p.tokens.push_back(t == 0 ? "<BOS>" : t == 8 ? "SEPARATOR_TOKEN" : std::to_string(t % 7));
  }
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h) {
      AttentionWeights w = uniform_causal(17);
      if (h % 2 == 1)
        for (int i = 1; i < 17; ++i) {
          for (int j = 0; j <= i; ++j) w[i][j] = 0;
          w[i][i - 1] = 1;
        }
      p.maps.push_back({l, h, w});
    }
  return p;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void check_fits(const std::string& text, int width) {
  for (const std::string& line : lines_of(text))
    BOOST_TEST(display_width(line) <= width, "too wide: [" << line << "]");
}

// A small XML well-formedness check: every tag opened is closed in order; comments and <? ?> skipped.
bool balanced_tags(const std::string& xml, std::string& why) {
  std::vector<std::string> stack;
  size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    const size_t end = xml.find('>', pos);
    if (end == std::string::npos) return why = "unterminated tag", false;
    const std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1))
        return why = "unexpected </" + tag.substr(1) + ">", false;
      stack.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    stack.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
  }
  if (!stack.empty()) return why = "unclosed <" + stack.back() + ">", false;
  return true;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("attograd_test_rendering_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

BOOST_AUTO_TEST_CASE(five_levels_are_equal_bins_of_the_largest_weight) {
  BOOST_TEST(heat_level(0.0f, 1.0f) == 0);
  BOOST_TEST(heat_level(0.19f, 1.0f) == 0);
  BOOST_TEST(heat_level(0.2f, 1.0f) == 1);
  BOOST_TEST(heat_level(0.5f, 1.0f) == 2);
  BOOST_TEST(heat_level(0.7f, 1.0f) == 3);
  BOOST_TEST(heat_level(0.8f, 1.0f) == 4);
  BOOST_TEST(heat_level(1.0f, 1.0f) == 4);
  BOOST_TEST(heat_level(0.25f, 0.5f) == 2);  // scaled by the largest weight, not by 1
  BOOST_TEST(heat_level(0.5f, 0.0f) == 0);
  BOOST_TEST(std::string(heat_glyph(0)) == kBlank);
  BOOST_TEST(std::string(heat_glyph(4)) == kFull);
}

BOOST_AUTO_TEST_CASE(heatmap_row_shows_the_expected_characters) {
  AttentionWeights w(5, std::vector<float>(5, 0.0f));
  w[4] = {0.0f, 0.2f, 0.5f, 0.8f, 1.0f};
  const std::vector<std::string> t = {"a", "b", "c", "d", "e"};
  const auto lines = lines_of(ascii_heatmap(w, t, t));
  BOOST_TEST_REQUIRE(lines.size() == 7u);  // header, 5 rows, legend
  // Label "e", a space, then five cells of width 6: five glyphs and a gap each.
  auto cell = [](const std::string& g) {
    std::string c;
    for (int k = 0; k < 5; ++k) c += g;
    return c + " ";
  };
  const std::string expected = "e " + cell(kBlank) + cell(kLight) + cell(kMedium) + cell(kFull) + cell(kFull);
  BOOST_TEST(lines[5] == expected);
  BOOST_TEST(lines[0] == "  a     b     c     d     e");
  BOOST_TEST(lines[6].find("max 1.000") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(terminal_pictures_fit_80_columns) {
  const Probe p = probe_17(2, 4);
  AsciiOptions o;
  o.mark_future = true;
  const std::string heat = ascii_heatmap(p.maps[1].weights, p.tokens, p.tokens, o);
  check_fits(heat, 80);
  BOOST_TEST(heat.find("\u00b7") != std::string::npos);           // masked cells drawn
  BOOST_TEST(heat.find("SEPARATOR_TOKEN") == std::string::npos);  // long labels are cut to fit
  const std::string grid = ascii_grid(p, o);
  check_fits(grid, 80);
  for (const char* title : {"L0 H0", "L0 H3", "L1 H0", "L1 H3"})
    BOOST_TEST(grid.find(title) != std::string::npos);
  // Eight heads in one layer must wrap rather than overflow.
  check_fits(ascii_grid(probe_17(1, 8), o), 80);
  const std::string table = weight_table(p.maps[0].weights, p.tokens, p.tokens, 2, 80);
  check_fits(table, 80);
  BOOST_TEST(table.find("0.50") != std::string::npos);      // row 1 of the uniform map
  BOOST_TEST(table.find("keys 0..") != std::string::npos);  // 17 columns of numbers need two blocks
  check_fits(ascii_difference(p.maps[0].weights, p.maps[1].weights, p.tokens, p.tokens, o), 80);
}

BOOST_AUTO_TEST_CASE(difference_shows_sign_and_legend) {
  AttentionWeights a = uniform_causal(3), b = uniform_causal(3);
  a[2] = {0.0f, 0.0f, 1.0f};  // A looks at itself, B spreads evenly
  const std::vector<std::string> t = {"x", "y", "z"};
  const std::string d = ascii_difference(a, b, t, t);
  const auto lines = lines_of(d);
  BOOST_TEST_REQUIRE(lines.size() >= 5u);
  BOOST_TEST(lines[3].find("-") != std::string::npos);          // keys 0, 1: B looks more
  BOOST_TEST(lines[3].find("+" + kFull) != std::string::npos);  // key 2: A looks more, the largest change
  BOOST_TEST(lines[1] == "x");                                  // identical rows are blank
  BOOST_TEST(d.find("+ where A looks more") != std::string::npos);
  BOOST_TEST(ascii_difference(a, a, t, t).find("identical") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(svg_grid_is_well_formed_labelled_and_escaped) {
  const Probe p = probe_17(2, 3);
  SvgOptions o;
  o.title = "reverse <step 500> & more";
  const std::string svg = svg_attention_grid(p, o);
  std::string why;
  BOOST_TEST(balanced_tags(svg, why), why);
  BOOST_TEST(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0u);
  for (const char* label :
       {"layer 0 head 0", "layer 1 head 2", "(0) &lt;BOS&gt;", "(16) 2", "attention weight", "masked",
        "url(#masked)", "reverse &lt;step 500&gt; &amp; more"})
    BOOST_TEST(svg.find(label) != std::string::npos, label);
  BOOST_TEST(svg.find("<BOS>") == std::string::npos);
  BOOST_TEST(count(svg, "http") == 1u);  // only the SVG namespace: no external references
  BOOST_TEST(svg.find("linearGradient") != std::string::npos);
  // 2 layers x 3 heads x 17 x 17 cells, plus one border per panel and the background.
  BOOST_TEST(count(svg, "<rect") >= 6u * 289u);
  BOOST_TEST(sequential_colour(0) == "#ffffff");
  BOOST_TEST(sequential_colour(1) == "#08306b");
  BOOST_TEST(diverging_colour(0) == "#ffffff");
}

BOOST_AUTO_TEST_CASE(svg_compare_is_well_formed_and_checks_shapes) {
  const Probe a = probe_17(1, 2);
  Probe b = a;
  b.tokens[3] = "9";
  b.maps[0].weights[5] = std::vector<float>(17, 0.0f);
  b.maps[0].weights[5][0] = 1;
  const std::string svg = svg_compare(a, b);
  std::string why;
  BOOST_TEST(balanced_tags(svg, why), why);
  BOOST_TEST(svg.find("layer 0 head 1 \u00b7 A \u2212 B") != std::string::npos);
  BOOST_TEST(svg.find("(3) 3/9") != std::string::npos);  // differing tokens shown together
  BOOST_TEST(svg.find("url(#div)") != std::string::npos);
  Probe shorter = a;
  shorter.tokens.pop_back();
  BOOST_CHECK_THROW(svg_compare(a, shorter), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(attention_dump_round_trip) {
  AttentionDump d;
  d.step = 500;
  d.probes.push_back(probe_17(2, 2));
  const std::string dir = temp_dir("dumps");
  const std::string path = dir + "/" + io::layout::step_stem(500) + ".json";
  BOOST_TEST(io::layout::step_stem(500) == "step-000500");
  write_attention_dump(path, d);
  AttentionDump later = d;
  later.step = 1000;
  write_attention_dump(dir + "/" + io::layout::step_stem(1000) + ".json", later);
  const AttentionDump back = read_attention_dump(path);
  BOOST_TEST(back.step == 500);
  BOOST_TEST_REQUIRE(back.probes.size() == 1u);
  BOOST_TEST(back.probes[0].ids == d.probes[0].ids);
  BOOST_TEST(back.probes[0].tokens == d.probes[0].tokens);
  BOOST_TEST_REQUIRE(back.probes[0].maps.size() == 4u);
  for (size_t m = 0; m < 4; ++m) {
    BOOST_TEST(back.probes[0].maps[m].layer == d.probes[0].maps[m].layer);
    BOOST_TEST(back.probes[0].maps[m].head == d.probes[0].maps[m].head);
    for (int i = 0; i < 17; ++i)
      for (int j = 0; j < 17; ++j)
        BOOST_TEST(std::fabs(back.probes[0].maps[m].weights[i][j] - d.probes[0].maps[m].weights[i][j]) <=
                   1e-6);
  }
  // The file uses the keys of docs/architecture.md "The run folder".
  const auto raw = nlohmann::json::parse(io::read_text_file(path));
  BOOST_TEST(raw["probes"][0]["maps"][0]["weights"][1][0].get<double>() == 0.5);
  const auto all = read_attention_dumps(dir);
  BOOST_TEST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].step == 500);
  BOOST_TEST(all[1].step == 1000);
  BOOST_TEST(read_attention_dumps(dir + "/absent").empty());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bad_dumps_give_one_line_errors_with_file_and_pointer) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      attention_dump_from_json(nlohmann::json::parse(text), "RUN/attention/step-000500.json");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  const std::string short_row = error_of(
      R"({"step": 500, "probes": [{"ids": [0, 1], "tokens": ["a", "b"],
          "maps": [{"layer": 0, "head": 0, "weights": [[1, 0], [0.5]]}]}]})");
  BOOST_TEST(
      short_row.find("RUN/attention/step-000500.json: /probes/0/maps/0/weights/1: expected 2 weights") == 0u,
      short_row);
  BOOST_TEST(short_row.find('\n') == std::string::npos);
  const std::string tokens =
      error_of(R"({"step": 1, "probes": [{"ids": [0, 1], "tokens": ["a"], "maps": []}]})");
  BOOST_TEST(tokens.find("/probes/0/tokens: expected 2 tokens") != std::string::npos, tokens);
  const std::string weight = error_of(
      R"({"step": 1, "probes": [{"ids": [0], "tokens": ["a"], "maps": [{"layer": 0, "head": 0, "weights": [[7]]}]}]})");
  BOOST_TEST(
      weight.find("/probes/0/maps/0/weights/0/0: expected a weight in [0, 1], got 7") != std::string::npos,
      weight);
  BOOST_TEST(error_of(R"({"probes": []})").find(": /: missing required key \"step\"") != std::string::npos);
  const std::string dup = error_of(
      R"({"step": 1, "probes": [{"ids": [0], "tokens": ["a"], "maps": [{"layer": 0, "head": 0, "weights": [[1]]},
          {"layer": 0, "head": 0, "weights": [[1]]}]}]})");
  BOOST_TEST(dup.find("/probes/0/maps/1: expected each (layer, head) once") != std::string::npos, dup);
  // Not JSON at all: the file is named too.
  const std::string dir = temp_dir("bad");
  io::write_text_file_atomically(dir + "/step-000001.json", "{\"step\": ");
  try {
    read_attention_dump(dir + "/step-000001.json");
    BOOST_FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find(dir + "/step-000001.json: line 1, column ") == 0u, e.what());
    BOOST_TEST(std::string(e.what()).find(": malformed JSON (") != std::string::npos, e.what());
  }
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(lower_triangle_is_one_byte_per_weight_in_base64) {
  // Bytes 255, 128, 128 (0.5 * 255 = 127.5 rounds up) are 0xFF8080: base64 "/4CA". The masked cell is not
  // stored.
  const AttentionWeights w = {{1.0f, 0.0f}, {0.5f, 0.5f}};
  BOOST_TEST(lower_triangle_base64(w) == "/4CA");
  const AttentionWeights back = lower_triangle_from_base64("/4CA", 2);
  BOOST_TEST(back[0][0] == 1.0f);
  BOOST_TEST(back[0][1] == 0.0f);
  BOOST_TEST(std::fabs(back[1][0] - 128 / 255.0f) < 1e-7);
  // A T = 17 map: 153 bytes, padded base64 of 204 characters; every weight within half a step.
  const AttentionWeights u = probe_17(1, 1).maps[0].weights;
  const std::string text = lower_triangle_base64(u);
  BOOST_TEST(text.size() == 204u);
  const AttentionWeights v = lower_triangle_from_base64(text, 17);
  for (int i = 0; i < 17; ++i)
    for (int j = 0; j < 17; ++j) BOOST_TEST(std::fabs(v[i][j] - u[i][j]) <= 0.5 / 255 + 1e-7);
  BOOST_CHECK_THROW(lower_triangle_from_base64(text, 16), std::invalid_argument);
  BOOST_CHECK_THROW(lower_triangle_from_base64("/4C*", 2), std::invalid_argument);
  BOOST_CHECK_THROW(lower_triangle_base64({{1.0f, 0.0f}}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(log_ticks_are_powers_of_ten_around_the_data) {
  double lo = 0, hi = 0;
  const std::vector<double> wide = log_ticks(0.003, 2.5, &lo, &hi);
  BOOST_TEST(lo == 0.001);
  BOOST_TEST(hi == 10.0);
  BOOST_TEST(wide == (std::vector<double>{0.001, 0.01, 0.1, 1, 10}), boost::test_tools::per_element());
  const std::vector<double> narrow = log_ticks(0.3, 2.5, &lo, &hi);
  BOOST_TEST(narrow == (std::vector<double>{0.1, 0.2, 0.5, 1, 2, 5, 10}), boost::test_tools::per_element());
  BOOST_TEST(log_ticks(0, 1) == (std::vector<double>{1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(inline_svgs_get_their_own_ids) {
  MatrixPanel panel{"p", {"a", "b"}, {"x"}, {{0.5}, {std::nan("")}}};
  MatrixSvgOptions opts;
  opts.title = "a title";
  const std::string svg = svg_matrices({panel}, opts);
  BOOST_TEST_REQUIRE(svg.find("id=\"scale\"") != std::string::npos);
  BOOST_TEST_REQUIRE(svg.find("url(#none)") != std::string::npos);
  const std::string a = inline_svg(svg, "one", "first"), b = inline_svg(svg, "two", "second");
  for (const std::string* s : {&a, &b}) {
    BOOST_TEST(s->find("id=\"scale\"") == std::string::npos);
    BOOST_TEST(s->find("url(#none)") == std::string::npos);
    BOOST_TEST(s->find("<?xml") == std::string::npos);
  }
  BOOST_TEST(count(a, "id=\"one-") == count(svg, "id=\""));
  BOOST_TEST(count(a, "url(#one-") == count(svg, "url(#"));
  BOOST_TEST(a.find("aria-label=\"first\"") != std::string::npos);
  BOOST_TEST(b.find("id=\"two-scale\"") != std::string::npos);
  std::string why;
  BOOST_TEST(balanced_tags(a, why), why);
  // A small matrix prints its values: 0.5 on a scale up to 0.5 is dark, so in white; the NaN cell none.
  BOOST_TEST(count(svg, "pointer-events=\"none\">") == 1u);
  BOOST_TEST(svg.find("fill=\"#fff\" pointer-events=\"none\">0.50</text>") != std::string::npos);
  // The SVG is at least as wide as its note: a long note widens it past the default 560 px.
  opts.note = std::string(120, 'n');
  const std::string noted = svg_matrices({panel}, opts);
  BOOST_TEST(noted.find("width=\"560\"") == std::string::npos);
  BOOST_TEST(noted.find("width=\"" + std::to_string(int(2 * 16 + 120 * 12 * 0.62 + 0.5))) !=
             std::string::npos);
}

// The page at the size of a shipped config's trained run (configs/induction.json): its dumps, probes, heads
// and sequence length, with every logged and evaluated step.
BOOST_AUTO_TEST_CASE(report_at_the_induction_configs_size_is_within_budget_and_self_contained) {
  const nlohmann::json cfg =
      nlohmann::json::parse(io::read_text_file(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/induction.json"));
  const int steps = cfg["train"]["steps"], every = cfg["output"]["attention_every"];
  const int probes = cfg["output"]["probes"], layers = cfg["model"]["n_layers"],
            heads = cfg["model"]["n_heads"];
  const int T = 2 * cfg["task"]["length"].get<int>();  // the induction task's sequence length
  const int log_every = cfg["train"]["log_every"], eval_every = cfg["train"]["eval_every"];
  BOOST_TEST_REQUIRE(steps / every + 1 == 51);  // keep the budget's input honest if the config changes
  ReportInputs in;
  in.title = "induction <test>";
  for (int s = 0; s <= steps; s += log_every) {
    ReportMetrics r;
    r.step = s;
    r.loss = 2.5 * std::exp(-s / 300.0);
    r.tokens_per_s = 1e5;
    if (s % eval_every == 0) r.eval_acc = s / double(steps), r.eval_loss = r.loss * 1.1;
    in.metrics.push_back(r);
  }
  uint32_t seed = 1;
  const auto noise = [&] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
  for (int k = 0; k <= steps / every; ++k) {
    AttentionDump d;
    d.step = int64_t(k) * every;
    for (int p = 0; p < probes; ++p) {
      Probe pr;
      for (int t = 0; t < T; ++t) {
        pr.ids.push_back(t % (T / 2));
        pr.tokens.push_back(t == 0 ? "BOS" : t == 1 ? "</script>" : std::to_string(t % (T / 2)));
      }
      for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
          AttentionWeights w(T, std::vector<float>(T, 0.0f));
          for (int i = 0; i < T; ++i) {
            float sum = 0;
            for (int j = 0; j <= i; ++j) sum += (w[i][j] = float(noise() % 1000 + 1));
            for (int j = 0; j <= i; ++j) w[i][j] /= sum;
          }
          pr.maps.push_back({l, h, w});
        }
      d.probes.push_back(pr);
    }
    in.dumps.push_back(d);
  }
  // The scores over training as a run without recorded scores has them (analysis/run_study.cpp).
  in.score_history_from_dumps = true;
  for (const AttentionDump& d : in.dumps)
    in.score_history.push_back({d.step, analysis::compute_head_scores(d.probes, {}, d.probes)});
  in.scores = {steps, analysis::compute_head_scores(in.dumps.back().probes, {}, in.dumps.back().probes)};
  in.scores.phase_change = PhaseChange{1234.0, std::nullopt, 800.0, 1500.0};
  const std::string html = report_html(in);
  BOOST_TEST(html.size() <= 3u * 1000 * 1000, html.size());
  // Sections in one order with a navigation entry each; the viewer first. No patching or lens: no entry.
  const size_t nav = html.find("<nav class=\"sections\"");
  BOOST_TEST_REQUIRE(nav != std::string::npos);
  const size_t a = html.find("<section id=\"attention\">"), t = html.find("<section id=\"training\">"),
               sc = html.find("<section id=\"scores\">"), ci = html.find("<section id=\"circuits\">");
  BOOST_TEST((nav < a && a < t && t < sc && sc < ci), html.substr(0, 3000));
  BOOST_TEST(html.find("href=\"#attention\"") != std::string::npos);
  BOOST_TEST(html.find("href=\"#patching\"") == std::string::npos);
  BOOST_TEST(html.find("<section id=\"lens\"") == std::string::npos);
  BOOST_TEST(html.find("<section id=\"sae\"") == std::string::npos);  // no SAEs: no section, no entry
  BOOST_TEST(html.find("href=\"#sae\"") == std::string::npos);
  BOOST_TEST(html.find("type=\"range\"") != std::string::npos);
  BOOST_TEST(html.find("<select id=\"probe\"") != std::string::npos);
  BOOST_TEST(html.find("<script type=\"application/json\" id=\"attograd-data\">") != std::string::npos);
  // The maps travel as base64 lower triangles, not as rows of decimals.
  BOOST_TEST(html.find(lower_triangle_base64(in.dumps[7].probes[2].maps[5].weights)) != std::string::npos);
  BOOST_TEST(html.find("\"weights\"") == std::string::npos);
  // Probes repeat at every dump: their tokens are written once each.
  BOOST_TEST(count(html, "\"BOS\"") == 1u);
  // Every chart starts at step 0 and ends at the last step; the losses have a log-scale twin; the phase
  // changes are marked (three of four happened).
  BOOST_TEST(count(html, "data-x0=\"0\" data-x1=\"5000\"") == count(html, "<svg class=\"chart\""));
  BOOST_TEST(html.find("id=\"loss-log\"") != std::string::npos);
  BOOST_TEST(html.find("data-log=\"1\"") != std::string::npos);
  BOOST_TEST(count(html, "<g class=\"phase\">") == 3 * count(html, "<svg class=\"chart\""));
  BOOST_TEST(html.find("induction phase change at step 1234") != std::string::npos);
  // Every network-looking reference is the SVG namespace name, which is never fetched.
  const size_t http = count(html, "http://"), https = count(html, "https://");
  BOOST_TEST(https == 0u);
  BOOST_TEST(http == count(html, "http://www.w3.org/2000/svg"));
  BOOST_TEST(html.find("src=") == std::string::npos);
  BOOST_TEST(html.find("@import") == std::string::npos);
  // Two script elements, each closed once: the token "</script>" was escaped inside the JSON.
  BOOST_TEST(count(html, "</script>") == 2u);
  BOOST_TEST(html.find("induction &lt;test&gt;") != std::string::npos);
  BOOST_TEST(html.find("previous-token score") != std::string::npos);
  BOOST_TEST(html.find("duplicate-token score") != std::string::npos);
  BOOST_TEST(html.find("<th>duplicate token</th>") != std::string::npos);
  BOOST_TEST(html.find("\"duplicate_token\":") != std::string::npos);  // per-dump scores for the viewer
  BOOST_TEST(html.find("<table class=\"scores\"") != std::string::npos);
  const std::string dir = temp_dir("report");
  write_report_html(dir + "/report.html", in);
  BOOST_TEST(io::read_text_file(dir + "/report.html") == html);
  std::filesystem::remove_all(dir);
}

namespace {

// eval.json as `attograd sae` writes it (the numbers are the text SAE's of docs/sae.md).
nlohmann::json text_sae_eval() {
  return nlohmann::json::parse(
      R"json({"point": "blocks.1.mlp.post", "d_in": 512, "d_sae": 1024, "tokens": 12600,
    "mse": 0.0093123, "explained_variance": 0.93214, "l0": 32, "dead": 7,
    "density_histogram": {"bins": ["dead", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
                                   "[1e-2,1e-1)", "[1e-1,1]"],
                          "counts": [7, 0, 9, 15, 133, 825, 35]},
    "ce_clean": 2.0549, "ce_with_sae": 2.0591, "ce_zero_ablation": 2.215, "ce_loss_recovered": 0.97412,
    "kl": 0.0056})json");
}

std::string error_of(const nlohmann::json& j) {
  try {
    sae_eval_from_json(j, "run/sae/p/eval.json");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// One row per SAE with eval.json's numbers, a bar per density bin (the dead one red, the largest full
// height), and the link to its page; a dash for a null and for a missing page.
BOOST_AUTO_TEST_CASE(report_lists_each_sae_with_its_numbers_histogram_and_link) {
  ReportInputs in;
  in.title = "text";
  nlohmann::json second = text_sae_eval();
  second["point"] = "blocks.0.resid_post";
  second["ce_loss_recovered"] = nullptr;
  in.saes = {sae_eval_from_json(text_sae_eval(), "a"), sae_eval_from_json(second, "b")};
  in.sae_pages = {"sae/blocks.1.mlp.post/features.html", ""};
  const std::string html = report_html(in);
  const size_t section = html.find("<section id=\"sae\"><h2>Sparse autoencoders</h2>");
  BOOST_TEST_REQUIRE(section != std::string::npos);
  BOOST_TEST(html.find("<a href=\"#sae\">Sparse autoencoders</a>") != std::string::npos);
  const size_t row = html.find("<tr><td>blocks.1.mlp.post</td>", section);
  BOOST_TEST_REQUIRE(row != std::string::npos);
  const std::string cells = html.substr(row, html.find("</tr>", row) - row);
  BOOST_TEST(cells.find("<td class=\"num\">512</td><td class=\"num\">1024</td><td class=\"num\">0.009312</td>"
                        "<td class=\"num\">0.9321</td><td class=\"num\">32.00</td><td class=\"num\">7</td>"
                        "<td class=\"num\">0.9741</td><td class=\"num\">0.0056</td>") != std::string::npos,
             cells);
  BOOST_TEST(
      cells.find("<a href=\"sae/blocks.1.mlp.post/features.html\">features.html</a>") != std::string::npos,
      cells);
  BOOST_TEST(count(cells, "<g><title>") == 7u);
  BOOST_TEST(cells.find("<title>[1e-2,1e-1): 825</title>") != std::string::npos);
  BOOST_TEST(cells.find("<title>[1e-6,1e-5): 0</title>") != std::string::npos);
  BOOST_TEST(cells.find("height=\"30.0\" fill=\"#1f77b4\"") != std::string::npos);  // 825, the largest
  BOOST_TEST(cells.find("fill=\"#d62728\"") != std::string::npos);                  // the dead bar
  const size_t svg = cells.find("<svg class=\"density\""), svg_end = cells.find("</svg>", svg) + 6;
  std::string why;
  BOOST_TEST(balanced_tags(cells.substr(svg, svg_end - svg), why), why);
  const size_t row2 = html.find("<tr><td>blocks.0.resid_post</td>", section);
  BOOST_TEST_REQUIRE(row2 != std::string::npos);
  const std::string cells2 = html.substr(row2, html.find("</tr>", row2) - row2);
  BOOST_TEST(count(cells2, "<td class=\"num muted\">&ndash;</td>") == 1u);  // the null CE loss recovered
  BOOST_TEST(cells2.find("<a href") == std::string::npos);
  BOOST_TEST(cells2.find("<td class=\"muted\">&ndash;</td>") != std::string::npos);
  // A folder name cannot end the link or read as a query.
  BOOST_TEST(report_sae_section(in.saes, {"sae/a\"b?c/features.html"})
                 .find("href=\"sae/a%22b%3Fc/features.html\"") != std::string::npos);
  BOOST_TEST(report_sae_section({}, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_malformed_eval_json_is_one_line_naming_the_file_and_field) {
  const auto with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json j = text_sae_eval();
    j[key] = v;
    return j;
  };
  nlohmann::json no_kl = text_sae_eval();
  no_kl.erase("kl");
  nlohmann::json short_counts = text_sae_eval();
  short_counts["density_histogram"]["counts"].erase(6);
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {nlohmann::json::array(), "run/sae/p/eval.json: /: expected an object, got array"},
      {no_kl, "run/sae/p/eval.json: /: missing required key \"kl\""},
      {with("mse", "small"), "run/sae/p/eval.json: /mse: expected a number or null, got string"},
      {with("dead", -3), "run/sae/p/eval.json: /dead: expected a non-negative integer, got -3"},
      {with("point", 1), "run/sae/p/eval.json: /point: expected a string, got number"},
      {with("density_histogram", 5),
       "run/sae/p/eval.json: /density_histogram: expected an object, got number"},
      {short_counts, "run/sae/p/eval.json: /density_histogram/counts: expected one count per bin (7), got 6"},
  };
  for (const auto& [j, expected] : cases) {
    const std::string e = error_of(j);
    BOOST_TEST(e == expected);
  }
  BOOST_TEST(error_of(text_sae_eval()) == "(no error)");
}

// Each example is the peak token with up to kSaeWindowBefore tokens before it and kSaeWindowAfter after,
// shaded by class, the peak boxed (<b>), its activation as a tooltip; features without examples are left out.
BOOST_AUTO_TEST_CASE(features_html_shows_a_window_around_each_peak) {
  BOOST_TEST_REQUIRE(kSaeWindowBefore == 24);
  BOOST_TEST_REQUIRE(kSaeWindowAfter == 8);
  SaeFeature f;
  f.index = 17;
  f.density = 0.25;
  SaeExample e;
  e.sequence = 3, e.position = 60, e.max = 2.0f;
  for (int t = 0; t < 100; ++t) e.tokens.push_back("t" + std::to_string(t) + "_");
  e.tokens[61] = "<x>";
  e.acts.assign(100, 0.f);
  e.acts[58] = 0.5f, e.acts[60] = 2.0f, e.acts[62] = 1.2f, e.acts[10] = 1.9f;
  f.examples.push_back(e);
  SaeExample early = e;  // a peak near the start: no cut before it
  early.position = 2;
  early.acts.assign(100, 0.f);
  early.acts[2] = 2.0f;
  f.examples.push_back(early);
  SaeFeature silent;
  silent.index = 5;
  const std::string html = sae_features_html("t", text_sae_eval(), {silent, f});
  BOOST_TEST(html.find("id=feature-17>") != std::string::npos);
  BOOST_TEST(html.find("id=feature-5>") == std::string::npos);
  const size_t ex = html.find("<div class=ex>&hellip;");
  BOOST_TEST_REQUIRE(ex != std::string::npos);
  const std::string first = html.substr(ex, html.find("</div>", ex) - ex);
  BOOST_TEST(first.find(">t35_<") == std::string::npos, first);
  BOOST_TEST(first.find("<i>t36_</i>") != std::string::npos, first);
  BOOST_TEST(first.find("<i class=a2 title=0.5>t58_</i>") != std::string::npos, first);  // 0.25 of the peak
  BOOST_TEST(first.find("<b class=a8 title=2>t60_</b>") != std::string::npos, first);
  BOOST_TEST(first.find("<i>&lt;x&gt;</i>") != std::string::npos, first);
  BOOST_TEST(first.find("<i class=a5 title=1.2>t62_</i>") != std::string::npos, first);  // 0.6 of the peak
  BOOST_TEST(first.find("<i>t68_</i>&hellip;") != std::string::npos, first);
  BOOST_TEST(first.find(">t69_<") == std::string::npos, first);
  BOOST_TEST(first.find("t10_") == std::string::npos, first);
  BOOST_TEST(count(first, "<i") + count(first, "<b") == 33u);
  const size_t ex2 = html.find("<div class=ex><i>t0_</i>");
  BOOST_TEST_REQUIRE(ex2 != std::string::npos);
  const std::string second = html.substr(ex2, html.find("</div>", ex2) - ex2);
  BOOST_TEST(count(second, "<i") + count(second, "<b") == 11u);  // 2 before, the peak, 8 after
  BOOST_TEST(second.find("<b class=a8 title=2>t2_</b>") != std::string::npos, second);
  // The evaluation's density histogram is drawn on the page too; nothing is fetched, no script runs.
  BOOST_TEST(html.find("<title>[1e-2,1e-1): 825</title>") != std::string::npos);
  BOOST_TEST(html.find("<script") == std::string::npos);
  BOOST_TEST(html.find("src=") == std::string::npos);
  BOOST_TEST(html.find("style=") == std::string::npos);  // shades are classes, not a style per token
}

// The page at the size of the SAE of docs/sae.md (configs/sae/text-mlp.json on configs/text.json's model):
// 1024 features, 5 examples each of 65 character tokens, a few tokens active around each peak.
BOOST_AUTO_TEST_CASE(features_html_at_the_text_saes_size_is_within_budget) {
  const nlohmann::json sae = nlohmann::json::parse(
      io::read_text_file(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/sae/text-mlp.json"));
  const nlohmann::json text =
      nlohmann::json::parse(io::read_text_file(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/text.json"));
  const int d_sae = sae["d_sae"], T = text["task"]["length"].get<int>() + 1, examples = 5;
  BOOST_TEST_REQUIRE(d_sae == 1024);
  uint32_t seed = 1;
  const auto noise = [&] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
  std::vector<SaeFeature> features(static_cast<size_t>(d_sae));
  for (int j = 0; j < d_sae; ++j) {
    SaeFeature& f = features[j];
    f.index = j;
    f.density = (noise() % 1000) / 1e4;
    for (int k = 0; k < 5; ++k) {
      f.promoted.push_back({std::string(1, char('a' + noise() % 26)), 0.5f});
      f.suppressed.push_back({std::string(1, char('a' + noise() % 26)), -0.5f});
    }
    for (int k = 0; k < examples; ++k) {
      SaeExample e;
      e.sequence = noise() % 200, e.position = 1 + noise() % (T - 1), e.max = 3.14159f;
      for (int t = 0; t < T; ++t) {
        const uint32_t c = noise() % 40;
        e.tokens.push_back(c == 0 ? "\\n" : c == 1 ? "\\s" : std::string(1, char('a' + c % 26)));
        e.acts.push_back(t == e.position ? e.max : noise() % 10 == 0 ? (noise() % 1000) / 400.f : 0.f);
      }
      f.examples.push_back(e);
    }
  }
  const std::string html = sae_features_html("text: SAE at blocks.1.mlp.post", text_sae_eval(), features);
  BOOST_TEST(html.size() <= 3u * 1000 * 1000, html.size());
  BOOST_TEST(count(html, "<div class=ex>") == size_t(d_sae) * examples);
  BOOST_TEST(count(html, "<b class=a8 title=3.14>") == size_t(d_sae) * examples);
}

// index.html's phase-change chart has a dot for each of summary.json's four phase-change steps.
BOOST_AUTO_TEST_CASE(sweep_index_marks_every_phase_change_step) {
  SweepSummary sum;
  sum.title = "runs/x";
  sum.base = "configs/induction.json";
  sum.grid = nlohmann::ordered_json::parse(R"({"seed": [1]})");
  SweepRunSummary r;
  r.name = "seed=1";
  r.setting = "base";
  r.status = "finished";
  r.phase_change = PhaseChange{1234.0, 777.0, 456.0, 1500.0};
  sum.runs.push_back(r);
  const std::string html = sweep_index_html(sum);
  for (const char* v : {"1234", "777", "456", "1500"})
    BOOST_TEST(html.find(std::string("<title>seed=1: ") + v + "</title>") != std::string::npos, v);
  BOOST_TEST(html.find(">task</text>") != std::string::npos);
}
