// `attograd patch`, `attograd lens`, `attograd detect` and `attograd circuits` through the binary: bad inputs
// are one line and exit 2, --json prints the documented schema (with --attribution too), --save and circuits
// write their files and the report shows them, circuits --processed prints without writing, and training a
// one-layer model ends with per-head circuits but no composition.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/run_command.h"
#include "common/temp_dir.h"

using testing::run_attograd;

namespace {

// A copy of the committed fixture run, so the commands may write into it.
std::string copy_fixture_run(const testing::TempDir& dir) {
  const std::string run = dir.file("run");
  std::filesystem::copy(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/induction_small", run,
                        std::filesystem::copy_options::recursive);
  return run;
}

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == s.size() - 1;
}

const std::string kClean = "\"BOS 1 4 3 7 2 9 5 3\"", kCorrupt = "\"BOS 1 4 3 8 2 9 5 3\"";

}  // namespace

BOOST_AUTO_TEST_CASE(patch_bad_inputs_are_one_line_exit_2) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto lengths = run_attograd("patch '" + run + "' --clean \"BOS 1 4 3\" --corrupt \"BOS 1 4\"");
  BOOST_TEST(lengths.exit_code == 2);
  BOOST_TEST(one_line(lengths.err), lengths.err);
  BOOST_TEST(lengths.err.find("same length") != std::string::npos, lengths.err);
  const auto unknown = run_attograd("patch '" + run + "' --clean \"BOS 1 x\" --corrupt \"BOS 1 4\"");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(one_line(unknown.err), unknown.err);
  BOOST_TEST(unknown.err.find("'x'") != std::string::npos, unknown.err);
  const auto answer = run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt +
                                   " --answer 7 --wrong zz");
  BOOST_TEST(answer.exit_code == 2);
  // Errors name the request's field ("wrong"), the same words Python's ValueError says.
  BOOST_TEST(answer.err.find("attograd patch: wrong: unknown token 'zz'") != std::string::npos, answer.err);
  const auto same = run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kClean);
  BOOST_TEST(same.exit_code == 2);
  BOOST_TEST(one_line(same.err), same.err);
  BOOST_TEST(same.err.find("give answer and wrong") != std::string::npos, same.err);
}

BOOST_AUTO_TEST_CASE(patch_json_schema_and_save) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r =
      run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt + " --json --save ab");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j.size() == 11u);  // answer, wrong, clean, corrupt, resid_pre, head_{z,all,q,k,v,pattern}
  BOOST_TEST(j.at("head_q").size() == 2u * 2u * 9u);
  BOOST_TEST(j.at("head_pattern").size() == 2u * 2u);
  BOOST_TEST(!j.contains("attribution"));
  const int T = 9, L = 2, H = 2;
  BOOST_TEST(j.at("resid_pre").size() == static_cast<size_t>((L + 1) * T));
  BOOST_TEST(j.at("head_z").size() == static_cast<size_t>(L * H * T));
  BOOST_TEST(j.at("head_all").size() == static_cast<size_t>(L * H));
  for (const auto& p : j.at("head_z")) BOOST_TEST((p.at("position").get<int>() >= 0 && p.size() == 4u));
  BOOST_TEST(j.at("answer").get<int>() != j.at("wrong").get<int>());
  BOOST_TEST(std::filesystem::exists(run + "/patching/ab.json"));
  BOOST_TEST(std::filesystem::exists(run + "/patching/ab.svg"));
  BOOST_TEST(testing::read_all(run + "/report.html").find("Activation patching") != std::string::npos);
  const auto table = run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt);
  BOOST_TEST_REQUIRE(table.exit_code == 0, table.err);
  BOOST_TEST(table.out.find("resid_pre 0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(patch_attribution_json_and_table) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r = run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt +
                              " --attribution --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& a = j.at("attribution");
  for (const char* kind : {"resid_pre", "head_z", "head_all", "head_q", "head_k", "head_v", "head_pattern"}) {
    BOOST_TEST(a.at(kind).size() == j.at(kind).size(), kind);
    BOOST_TEST(a.at(kind)[0].size() == j.at(kind)[0].size(), kind);
  }
  const auto table =
      run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt + " --attribution");
  BOOST_TEST_REQUIRE(table.exit_code == 0, table.err);
  BOOST_TEST(table.out.find("Pearson") != std::string::npos, table.out);
  BOOST_TEST(table.out.find("head_pattern") != std::string::npos, table.out);
}

BOOST_AUTO_TEST_CASE(lens_json_save_and_errors) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r =
      run_attograd("lens '" + run + "' --tokens " + kClean + " --answer 7 --wrong 8 --json --save ab");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  BOOST_TEST(
      (keys == std::set<std::string>{"answer", "wrong", "positions", "accumulated", "components", "actual"}));
  const size_t T = 9, L = 2, H = 2;
  BOOST_TEST(j.at("positions").size() == T);
  BOOST_TEST(j.at("accumulated").size() == (L + 1) * T);
  // embed, pos_embed, per layer H heads + attention bias + MLP, ln_f.bias, lm_head.bias
  BOOST_TEST(j.at("components").size() == (2 + L * (H + 2) + 2) * T);
  BOOST_TEST(j.at("components")[2 * T].at("name") == "blocks.0.attn.head.0");
  BOOST_TEST(j.at("accumulated")[0].at("point") == "blocks.0.resid_pre");
  BOOST_TEST(j.at("actual").size() == T);
  double sum = 0;  // the components at the last position sum to the actual metric there
  for (const auto& c : j.at("components"))
    if (c.at("position") == T - 1) sum += c.at("value").get<double>();
  BOOST_TEST(std::fabs(sum - j.at("actual")[T - 1].at("value").get<double>()) < 1e-4);
  BOOST_TEST(std::filesystem::exists(run + "/lens/ab.json"));
  BOOST_TEST(std::filesystem::exists(run + "/lens/ab.svg"));
  BOOST_TEST(testing::read_all(run + "/report.html").find("Logit lens") != std::string::npos);
  const auto mean = run_attograd("lens '" + run + "' --tokens " + kClean + " --json");
  BOOST_TEST_REQUIRE(mean.exit_code == 0, mean.err);
  BOOST_TEST(nlohmann::json::parse(mean.out).at("wrong").is_null());
  const auto table = run_attograd("lens '" + run + "' --ids \"0 2 5 4 8\"");
  BOOST_TEST_REQUIRE(table.exit_code == 0, table.err);
  BOOST_TEST(table.out.find("blocks.1.attn.head.1") != std::string::npos, table.out);
  for (const std::string& bad :
       {std::string(" --tokens \"BOS 1 zz\""), std::string(" --tokens ") + kClean + " --wrong 3",
        std::string(" --tokens ") + kClean + " --answer 3 --wrong 3", std::string(" --ids \"0 99\""),
        std::string("")}) {
    const auto e = run_attograd("lens '" + run + "'" + bad);
    BOOST_TEST(e.exit_code == 2, bad);
    BOOST_TEST(one_line(e.err), bad << ": " << e.err);
  }
}

BOOST_AUTO_TEST_CASE(detect_json_and_errors) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r = run_attograd("detect '" + run + "' --pattern previous --n 8 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j.at("sequences") == 8);
  BOOST_TEST(j.at("heads").size() == 4u);
  for (const auto& h : j.at("heads")) BOOST_TEST((h.at("score") >= 0.0 && h.at("score") <= 1.0));
  const auto one = run_attograd("detect '" + run + "' --pattern induction --mode abs --tokens " + kClean);
  BOOST_TEST_REQUIRE(one.exit_code == 0, one.err);
  BOOST_TEST(one.out.find("L1 H") != std::string::npos, one.out);
  std::ofstream(dir.file("wrong_size.json")) << "{\"pattern\": [[1, 0], [0, 1]]}";
  for (const std::string& bad :
       {std::string(" --pattern sideways"), std::string(" --pattern previous --mode max"),
        " --pattern '" + dir.file("wrong_size.json") + "' --tokens " + kClean,
        " --pattern '" + dir.file("missing.json") + "'"}) {
    const auto e = run_attograd("detect '" + run + "'" + bad);
    BOOST_TEST(e.exit_code == 2, bad);
    BOOST_TEST(one_line(e.err), bad << ": " << e.err);
  }
}

BOOST_AUTO_TEST_CASE(circuits_processed_prints_and_writes_nothing) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r = run_attograd("circuits '" + run + "' --processed --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(nlohmann::json::parse(r.out).at("heads").size() == 4u);
  BOOST_TEST(!std::filesystem::exists(run + "/circuits.json"));
}

BOOST_AUTO_TEST_CASE(circuits_json_and_files) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r = run_attograd("circuits '" + run + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j.at("composition").size() == 4u);
  BOOST_TEST(j.at("composition")[0].at("from").size() == 2u);
  BOOST_TEST(j.at("baseline").at("k").get<double>() > 0);
  BOOST_TEST(j.at("heads").size() == 4u);
  BOOST_TEST(std::filesystem::exists(run + "/circuits.json"));
  BOOST_TEST(std::filesystem::exists(run + "/circuits/composition.svg"));
  BOOST_TEST(std::filesystem::exists(run + "/circuits/positional_qk.svg"));
  BOOST_TEST(testing::read_all(run + "/report.html").find("<h2>Circuits</h2>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(one_layer_model_has_no_composition) {
  testing::TempDir dir;
  const std::string run = dir.file("one");
  const auto t = run_attograd(
      "train tests/fixtures/induction_small_config.json --set model.n_layers=1 --set train.steps=3 "
      "--out '" +
      run + "'");
  BOOST_TEST_REQUIRE(t.exit_code == 0, t.err);
  const nlohmann::json written = nlohmann::json::parse(testing::read_all(run + "/circuits.json"));
  BOOST_TEST(written.at("composition").empty());
  BOOST_TEST(written.at("baseline").is_null());
  BOOST_TEST(written.at("heads").size() == 2u);
  const auto c = run_attograd("circuits '" + run + "'");
  BOOST_TEST(c.exit_code == 2);
  BOOST_TEST(one_line(c.err), c.err);
  BOOST_TEST(c.err.find("at least 2 layers") != std::string::npos, c.err);
  const auto ok = run_attograd("circuits '" + run + "' --no-composition --json");
  BOOST_TEST(ok.exit_code == 0, ok.err);
}
