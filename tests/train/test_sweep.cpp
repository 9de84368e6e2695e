// Sweep files: the grid's product in order (first key slowest), run names made of the varying settings,
// every run's config equal to `--set`'s, and every committed sweep file loading.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
#include "io/printable.h"
#include "train/sweep.h"

namespace fs = std::filesystem;

namespace {

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

}  // namespace

BOOST_AUTO_TEST_CASE(grid_product_names_and_configs) {
  testing::TempDir dir;
  const std::string base =
      write(dir, "base.json", R"({"name": "b", "task": {"kind": "copy", "vocab": 6, "length": 4},
      "model": {"d_model": 8, "n_heads": 2}})");
  const std::string path = write(dir, "s.json",
                                 R"({"base": ")" + base + R"(",
      "grid": {"model.d_model": [8, 16], "task.kind": ["copy", "reverse"], "train.steps": [7],
               "seed": [3, 1, 2]}, "out": ")" +
                                     dir.file("out") + "\"}");
  const train::Sweep sweep = train::load_sweep(path);
  BOOST_REQUIRE(sweep.runs.size() == 12u);
  // First key slowest, last fastest; the one-valued key names no run.
  BOOST_TEST(sweep.runs[0].name == "d_model=8,kind=copy,seed=3");
  BOOST_TEST(sweep.runs[1].name == "d_model=8,kind=copy,seed=1");
  BOOST_TEST(sweep.runs[3].name == "d_model=8,kind=reverse,seed=3");
  BOOST_TEST(sweep.runs[11].name == "d_model=16,kind=reverse,seed=2");
  for (const train::SweepRun& run : sweep.runs) {
    const train::Config by_set = train::load_config(base, run.overrides);
    BOOST_TEST(train::same_run_config(run.config, by_set), run.name);
    BOOST_TEST(run.config.train.steps == 7);
    BOOST_TEST(run.config.output.dir == (fs::path(dir.file("out")) / run.name).string());
  }
  BOOST_TEST(sweep.runs[11].config.model.d_model == 16);
  BOOST_TEST(sweep.runs[11].config.task.kind == "reverse");
  BOOST_TEST(sweep.runs[11].config.seed == 2u);
  BOOST_TEST(!fs::exists(dir.file("out")), "loading a sweep wrote its out folder");

  // Keys sharing a last segment are named in full; values that a path or shell would trip on become '-'.
  const std::string two = write(dir, "two.json", R"({"base": ")" + base + R"(",
      "grid": {"task.vocab": [6, 8], "model.vocab": [0, 20], "name": ["a b/c"]}})");
  const train::Sweep named = train::load_sweep(two);
  BOOST_TEST(named.runs[1].name == "task.vocab=6,model.vocab=20");
  BOOST_TEST(named.out == "runs/two");
  const train::Sweep one = train::load_sweep(write(dir, "one.json", R"({"base": ")" + base + R"(",
      "grid": {"name": ["a b/c"]}})"));
  BOOST_TEST(one.runs[0].name == "name=a-b-c");
  BOOST_TEST(train::same_run_config(one.runs[0].config, train::load_config(base, {"name=a b/c"})));
}

BOOST_AUTO_TEST_CASE(committed_sweeps_load) {
  for (const auto& entry : fs::directory_iterator(fs::path(ATTOGRAD_SOURCE_DIR) / "sweeps")) {
    const fs::path cwd = fs::current_path();
    fs::current_path(ATTOGRAD_SOURCE_DIR);  // their paths are relative to the repository
    BOOST_CHECK_NO_THROW(train::load_sweep(entry.path().string()));
    fs::current_path(cwd);
  }
}

// Found by fuzz_sweep: a grid key with a control byte (JSON "\b") reached the run's name and the error
// line raw. Keys must be plain key paths, and base/out printable text; every message stays printable.
BOOST_AUTO_TEST_CASE(keys_and_paths_with_control_bytes_are_refused_printably) {
  testing::TempDir dir;
  const std::string base = write(dir, "base.json", R"({"task": {"kind": "copy", "vocab": 6, "length": 4}})");
  const auto error_of = [&](const std::string& text) -> std::string {
    try {
      train::load_sweep(write(dir, "s.json", text));
    } catch (const train::ConfigError& e) {
      return e.what();
    }
    return "(loaded)";
  };
  const std::string key = error_of(R"({"base": ")" + base + R"(", "grid": {"task.vo\bcab": [5]}})");
  BOOST_TEST(key.find(R"(/grid/task.vo\x08cab: expected a config key path)") != std::string::npos, key);
  const std::string slash = error_of(R"({"base": ")" + base + R"(", "grid": {"/task.vocab": [5]}})");
  BOOST_TEST(slash.find("/grid//task.vocab: expected a config key path") != std::string::npos, slash);
  const std::string top = error_of(R"({"base": ")" + base + R"(", "gr\nid": {}})");
  BOOST_TEST(top.find(R"(/gr\x0aid: unknown key)") != std::string::npos, top);
  const std::string b = error_of(R"({"base": "a\u001bb", "grid": {"seed": [1]}})");
  BOOST_TEST(b.find(R"(/base: expected UTF-8 text without control characters, got string "a\u001bb")") !=
                 std::string::npos,
             b);
  const std::string out =
      error_of(R"({"base": ")" + base + R"(", "grid": {"seed": [1]}, "out": "x\u0007y"})");
  BOOST_TEST(out.find(R"(/out: expected UTF-8 text without control characters, got string "x\u0007y")") !=
                 std::string::npos,
             out);
  for (const std::string& e : {key, slash, top, b, out}) BOOST_TEST(io::is_printable_utf8(e), e);
}
