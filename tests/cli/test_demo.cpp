// attograd demo, run as a user runs it: exit 0, every line within 80 columns, the lesson's softmax numbers,
// the six tokens, every section heading, the sqrt(dk) section's finding, and --section running one section.
#include <boost/test/unit_test.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "findings/utf8_label.h"

namespace {

struct Run {
  int exit_code = -1;
  std::string out;
};

// What a person sees: stdout, then anything on stderr.
Run run_demo(const std::string& args = "") {
  const testing::CommandResult r = testing::run_attograd("demo " + args);
  return {r.exit_code, r.out + r.err};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The numbers after `label` on the first line that starts with it.
std::vector<double> numbers_after(const std::vector<std::string>& lines, const std::string& label) {
  std::vector<double> out;
  for (const std::string& line : lines)
    if (starts_with(line, label)) {
      std::istringstream in(line.substr(label.size()));
      for (double v; in >> v;) out.push_back(v);
      return out;
    }
  return out;
}

const std::vector<std::string> kHeadings = {
    "== 1. Softmax, numerically stable ==",
    "== 2. Self-attention on six tokens ==",
    "== 3. Causal mask (exercise 1) ==",
    "== 4. Two heads and Wo (exercise 2) ==",
    "== 5. Two sentences, one instance (exercise 3) ==",
    "== 6. Why divide by sqrt(dk) ==",
    "== 7. Attention as a soft database lookup ==",
};

}  // namespace

BOOST_AUTO_TEST_CASE(demo_runs_and_fits_80_columns) {
  const Run r = run_demo();
  BOOST_TEST(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  BOOST_TEST(lines.size() > 50u);
  for (const std::string& line : lines)
    BOOST_TEST(findings::display_width(line) <= 80, "too wide: [" << line << "]");
}

BOOST_AUTO_TEST_CASE(every_section_heading_appears_in_order) {
  const Run r = run_demo();
  size_t at = 0;
  for (const std::string& h : kHeadings) {
    const size_t found = r.out.find(h, at);
    BOOST_TEST(found != std::string::npos, "missing or out of order: " << h);
    if (found != std::string::npos) at = found;
  }
}

BOOST_AUTO_TEST_CASE(softmax_of_the_lesson_logits) {
  const auto lines = lines_of(run_demo().out);
  bool seen = false;
  for (const std::string& line : lines)
    if (starts_with(line, "softmax ")) {
      seen = true;
      BOOST_TEST(line.find("0.659") != std::string::npos, line);
      BOOST_TEST(line.find("0.242") != std::string::npos, line);
      BOOST_TEST(line.find("0.099") != std::string::npos, line);
    }
  BOOST_TEST(seen);
  // The naive form overflows on large logits; the stable one does not.
  bool naive_nan = false, stable_ok = false;
  for (const std::string& line : lines) {
    if (line.find("naive") != std::string::npos && line.find("nan") != std::string::npos) naive_nan = true;
    if (line.find("stable") != std::string::npos && line.find("0.665") != std::string::npos) stable_ok = true;
  }
  BOOST_TEST(naive_nan);
  BOOST_TEST(stable_ok);
}

BOOST_AUTO_TEST_CASE(the_six_tokens_label_the_maps) {
  const Run r = run_demo("--section 2");
  BOOST_TEST(r.exit_code == 0);
  for (const char* token : {"The", "cat", "sat", "on", "the", "mat"})
    BOOST_TEST(r.out.find(token) != std::string::npos, token);
  // The weight table's header row names the six keys in order.
  bool header = false;
  for (const std::string& line : lines_of(r.out)) {
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words == std::vector<std::string>{"The", "cat", "sat", "on", "the", "mat"}) header = true;
  }
  BOOST_TEST(header);
  BOOST_TEST(r.out.find("\u2588") != std::string::npos);  // the heatmap's top level
}

BOOST_AUTO_TEST_CASE(unscaled_scores_saturate_softmax) {
  const Run r = run_demo("--section 6");
  BOOST_TEST(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  // Columns: score spread, largest weight (median), share of saturated queries, gradient norm (median).
  const std::vector<double> unscaled = numbers_after(lines, "  without 1/sqrt(dk)");
  const std::vector<double> scaled = numbers_after(lines, "  with 1/sqrt(dk)");
  BOOST_REQUIRE(unscaled.size() == 4u);
  BOOST_REQUIRE(scaled.size() == 4u);
  BOOST_TEST(unscaled[0] > scaled[0]);
  BOOST_TEST(unscaled[1] > scaled[1]);
  BOOST_TEST(unscaled[2] > scaled[2]);
  BOOST_TEST(unscaled[3] < scaled[3]);
}

BOOST_AUTO_TEST_CASE(one_section_only) {
  const Run r = run_demo("--section 7");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.find(kHeadings[6]) != std::string::npos);
  BOOST_TEST(r.out.find(kHeadings[0]) == std::string::npos);
  BOOST_TEST(r.out.find("attograd train configs/reverse.json") != std::string::npos);
  BOOST_TEST(run_demo("--section 9").exit_code == 2);
}
