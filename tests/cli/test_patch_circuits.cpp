// `attograd patch` and `attograd circuits` through the binary: bad inputs are one line and exit 2, --json
// prints the documented schema, --save and circuits write their files, and training a one-layer model ends
// with per-head circuits but no composition.
#define BOOST_TEST_MODULE patch_circuits_cli
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

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
  BOOST_TEST(answer.err.find("--wrong") != std::string::npos, answer.err);
  const auto same = run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kClean);
  BOOST_TEST(same.exit_code == 2);
  BOOST_TEST(one_line(same.err), same.err);
  BOOST_TEST(same.err.find("--answer and --wrong") != std::string::npos, same.err);
}

BOOST_AUTO_TEST_CASE(patch_json_schema_and_save) {
  testing::TempDir dir;
  const std::string run = copy_fixture_run(dir);
  const auto r =
      run_attograd("patch '" + run + "' --clean " + kClean + " --corrupt " + kCorrupt + " --json --save ab");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j.size() == 7u);
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
