// The study commands end to end: attend, compare, ablate (and its single modes) on a tiny run trained once
// by the real binary.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/run_command.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_attograd;
using testing::shell_quote;

namespace {

fs::path temp_root() {
  static const fs::path root = [] {
    std::string pattern = (fs::temp_directory_path() / "attograd-study-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    return fs::path(pattern);
  }();
  return root;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

size_t lines(const std::string& text) {
  size_t n = count(text, "\n");
  return n + (!text.empty() && text.back() != '\n');
}

// A tiny reverse run (2 layers x 2 heads, d_model 16), trained once for every test.
const std::string& run_dir() {
  static const std::string dir = [] {
    const std::string d = (temp_root() / "rev").string();
    const CommandResult r = run_attograd(
        "train " + shell_quote(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/reverse.json") + " --out " +
        shell_quote(d) +
        " --set train.steps=30 --set model.d_model=16 --set model.n_heads=2 --set model.n_layers=2"
        " --set model.d_ff=32 --set train.eval_size=64 --set output.attention_every=10");
    if (r.exit_code != 0) throw std::runtime_error("training the test run failed: " + r.err);
    return d;
  }();
  return dir;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(temp_root(), ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(Cleanup);

const std::string kInput = "'3 1 4 1 5 9 2 6 SEP'";  // reverse: vocab 10, length 8; BOS is added

}  // namespace

BOOST_AUTO_TEST_SUITE(attend)

BOOST_AUTO_TEST_CASE(default_draws_one_panel_per_head_and_says_bos_was_added) {
  const CommandResult r = run_attograd("attend " + shell_quote(run_dir()) + " --tokens " + kInput);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  for (const char* head : {"L0 H0", "L0 H1", "L1 H0", "L1 H1"}) BOOST_TEST(count(r.out, head) == 1u, head);
  BOOST_TEST(count(r.out, "L2 ") == 0u);
  BOOST_TEST(count(r.out, "BOS put in front") == 1u);
  BOOST_TEST(count(r.out, "10 tokens: BOS 3 1 4 1 5 9 2 6 SEP") == 1u);

  const CommandResult with_bos =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens 'BOS 3 1 4 1 5 9 2 6 SEP'");
  BOOST_TEST_REQUIRE(with_bos.exit_code == 0, with_bos.err);
  BOOST_TEST(count(with_bos.out, "BOS put in front") == 0u);
  // The same input either way: only the note line differs.
  BOOST_TEST(with_bos.out.size() < r.out.size());
}

BOOST_AUTO_TEST_CASE(layer_and_head_pick_one_full_size_map_with_its_weights) {
  const CommandResult r =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens " + kInput + " --layer 1 --head 0");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(count(r.out, "layer 1 head 0") == 1u);
  BOOST_TEST(count(r.out, "layer 0 head") == 0u);
  BOOST_TEST(count(r.out, "head 1") == 0u);
  BOOST_TEST(count(r.out, "L0 H0") == 0u);
  BOOST_TEST(count(r.out, "weights (row i") == 1u);
  BOOST_TEST(count(r.out, "1.00") >= 1u);  // row 0 (BOS) can only look at itself
}

BOOST_AUTO_TEST_CASE(bad_layer_or_head_is_a_one_line_usage_error_naming_the_range) {
  const CommandResult head =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens " + kInput + " --head 2");
  BOOST_TEST(head.exit_code == 2);
  BOOST_TEST(lines(head.err) == 1u);
  BOOST_TEST(count(head.err, "head 2:") == 1u, head.err);
  BOOST_TEST(count(head.err, "0..1") == 1u, head.err);
  BOOST_TEST(head.out.empty());

  const CommandResult layer =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens " + kInput + " --layer -1");
  BOOST_TEST(layer.exit_code == 2);
  BOOST_TEST(lines(layer.err) == 1u);
  BOOST_TEST(count(layer.err, "layer -1:") == 1u, layer.err);
}

BOOST_AUTO_TEST_CASE(unknown_token_and_missing_run_are_usage_errors) {
  const CommandResult r = run_attograd("attend " + shell_quote(run_dir()) + " --tokens '3 x 4'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(lines(r.err) == 1u);
  BOOST_TEST(count(r.err, "'x'") == 1u, r.err);

  const CommandResult none =
      run_attograd("attend " + shell_quote((temp_root() / "no-such-run").string()) + " --tokens 3");
  BOOST_TEST(none.exit_code == 2);
  BOOST_TEST(lines(none.err) == 1u);

  const CommandResult too_long =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens '1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9'");
  BOOST_TEST(too_long.exit_code == 2);
  BOOST_TEST(count(too_long.err, "max_len") == 1u, too_long.err);
}

BOOST_AUTO_TEST_CASE(svg_writes_a_picture) {
  const std::string svg = (temp_root() / "attend.svg").string();
  const CommandResult r =
      run_attograd("attend " + shell_quote(run_dir()) + " --tokens " + kInput + " --svg " + shell_quote(svg));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const std::string text = io::read_text_file(svg);
  BOOST_TEST((text.rfind("<svg", 0) == 0 || text.rfind("<?xml", 0) == 0));
  BOOST_TEST(count(text, "</svg>") >= 1u);
  BOOST_TEST(!fs::exists(svg + ".tmp"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(compare)

BOOST_AUTO_TEST_CASE(different_lengths_are_a_usage_error) {
  const CommandResult r = run_attograd("compare " + shell_quote(run_dir()) + " --a '3 1 4' --b '3 1 4 1'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(lines(r.err) == 1u);
  BOOST_TEST(count(r.err, "same length") == 1u, r.err);
}

BOOST_AUTO_TEST_CASE(maps_difference_and_total_variation_per_head) {
  const std::string svg = (temp_root() / "compare.svg").string();
  const CommandResult r = run_attograd("compare " + shell_quote(run_dir()) + " --a " + kInput +
                                       " --b '3 1 4 1 5 9 2 7 SEP' --svg " + shell_quote(svg));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  for (const char* head : {"L0 H0   total variation", "L0 H1   total variation", "L1 H0   total variation",
                           "L1 H1   total variation"})
    BOOST_TEST(count(r.out, head) == 1u, head);
  BOOST_TEST(count(r.out, "A - B max") == 4u);
  BOOST_TEST(count(r.out, "6/7") == 4u);  // the differing position labels its row, once per head
  const std::string text = io::read_text_file(svg);
  BOOST_TEST((text.rfind("<svg", 0) == 0 || text.rfind("<?xml", 0) == 0));

  // One input against itself: every head's maps are identical.
  const CommandResult same = run_attograd("compare " + shell_quote(run_dir()) + " --a " + kInput + " --b " +
                                          kInput + " --layer 0 --head 1");
  BOOST_TEST_REQUIRE(same.exit_code == 0, same.err);
  BOOST_TEST(count(same.out, "L0 H1   total variation 0.000") == 1u, same.out);
  BOOST_TEST(count(same.out, "L1 H") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ablate)

BOOST_AUTO_TEST_CASE(writes_ablation_for_every_head_and_rebuilds_the_report) {
  const std::string dir = run_dir();
  const std::string report = dir + "/report.html";
  BOOST_TEST_REQUIRE(fs::exists(report));
  fs::remove(report);
  const CommandResult r = run_attograd("ablate " + shell_quote(dir));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(count(r.out, "baseline") >= 1u);
  BOOST_TEST(count(r.out, "zero_acc") >= 1u);
  BOOST_TEST(fs::exists(report));
  BOOST_TEST(count(io::read_text_file(report), "zeroed: acc") >= 1u);  // the ablation columns

  const nlohmann::json scores = nlohmann::json::parse(io::read_text_file(dir + "/scores.json"));
  BOOST_TEST_REQUIRE(scores["heads"].size() == 4u);
  for (const auto& h : scores["heads"]) {
    BOOST_TEST_REQUIRE(h.contains("ablation"), h.dump());
    for (const char* k : {"zero_acc", "mean_acc"}) {
      BOOST_TEST_REQUIRE(h["ablation"][k].is_number(), h.dump());
      const double v = h["ablation"][k].get<double>();
      BOOST_TEST((v >= 0.0 && v <= 1.0), k << " = " << v);
    }
    for (const char* k : {"zero_loss", "mean_loss"}) {
      BOOST_TEST_REQUIRE(h["ablation"][k].is_number(), h.dump());
      BOOST_TEST(h["ablation"][k].get<double>() > 0.0);
    }
    // The pattern scores are kept next to the ablation; training computed the duplicate-token score over
    // its repeated random probes, which always repeat some token.
    BOOST_TEST(h.contains("previous_token"));
    BOOST_TEST_REQUIRE(h["duplicate_token"].is_number(), h.dump());
    BOOST_TEST((h["duplicate_token"].get<double>() >= 0.0 && h["duplicate_token"].get<double>() <= 1.0));
  }
}

BOOST_AUTO_TEST_CASE(a_single_mode_prints_json_and_leaves_scores_alone) {
  const std::string dir = run_dir();
  const std::string before = fs::exists(dir + "/scores.json") ? io::read_text_file(dir + "/scores.json") : "";
  const CommandResult r =
      run_attograd("ablate " + shell_quote(dir) + " --mode resample --k 2 --n 8 --per-position --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["mode"] == "resample");
  BOOST_TEST(j["k"] == 2);
  const int T = static_cast<int>(j["heads"].size()) / 4 - 1;  // 4 heads, each at all positions and at each
  BOOST_TEST(T >= 2);
  BOOST_TEST(j["heads"][0]["position"].is_null());
  BOOST_TEST(j["heads"][1]["position"] == 0);
  const std::string after = fs::exists(dir + "/scores.json") ? io::read_text_file(dir + "/scores.json") : "";
  BOOST_TEST((before == after));
  const CommandResult bad = run_attograd("ablate " + shell_quote(dir) + " --per-position");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(count(bad.err, "\n") == 1u, bad.err);
  const CommandResult one = run_attograd("ablate " + shell_quote(dir) + " --mode resample --n 1");
  BOOST_TEST(one.exit_code == 2);
}

BOOST_AUTO_TEST_SUITE_END()
