// Sweep files: the grid's product in order (first key slowest), run names made of the varying settings,
// every run's config equal to `--set`'s, and every committed sweep file loading.
#define BOOST_TEST_MODULE sweep
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
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
