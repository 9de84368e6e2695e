// A run folder's state (runner/run_state.h) from the files and locks alone, without training: a missing or
// empty folder is new, a folder that holds something else is refused, a run whose lock another holder has
// is busy (and not without `live`), a checkpoint-less run is new, and the JSON names every fact. And what a
// trained run's folder holds with the study beside the trainer: a run learns and writes every file.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/run_study.h"
#include "common/temp_dir.h"
#include "io/run_ownership.h"
#include "runner/run_state.h"
#include "train/metrics_log.h"
#include "train/trainer.h"

namespace {

const char* const kFiles[] = {"config.json",
                              "metrics.jsonl",
                              "checkpoint/model.safetensors",
                              "checkpoint/optimizer-000040.safetensors",
                              "attention/step-000000.json",
                              "attention/step-000040.json",
                              "attention/step-000040.svg",
                              "scores.json",
                              "report.html"};

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  for (const auto& r : train::read_metrics_jsonl(metrics)) out.push_back(r.loss);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(new_folders_and_refused_ones) {
  testing::TempDir dir;
  BOOST_TEST(runner::run_state(dir.file("missing")).state == "new");
  std::filesystem::create_directories(dir.file("empty"));
  BOOST_TEST(runner::run_state(dir.file("empty")).state == "new");
  std::ofstream(dir.file("file")) << "x";
  BOOST_CHECK_THROW(runner::run_state(dir.file("file")), std::runtime_error);
  std::filesystem::create_directories(dir.file("other"));
  std::ofstream(dir.file("other/notes.txt")) << "x";
  BOOST_CHECK_THROW(runner::run_state(dir.file("other")), std::runtime_error);
  // Without `live`, only the run's files decide: a folder of other things holds no checkpoint.
  BOOST_TEST(runner::run_state(dir.file("other"), {false}).state == "new");
}

BOOST_AUTO_TEST_CASE(a_locked_run_is_busy) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  io::mark_run_folder(run);
  BOOST_TEST(runner::run_state(run).state == "new");
  BOOST_TEST(io::folder_lock_holder(run).empty());
  {
    const io::RunLock lock(run);  // another open file description: flock refuses this process's probe too
    const findings::RunState s = runner::run_state(run);
    BOOST_TEST(s.state == "busy");
    BOOST_TEST(s.holder_pid == std::to_string(::getpid()));
    BOOST_TEST(runner::run_state(run, {false}).state == "new");
    const nlohmann::ordered_json j = findings::run_state_to_json(s);
    BOOST_TEST(j.dump() ==
               "{\"path\":\"" + run + "\",\"state\":\"busy\",\"step\":null,\"steps\":null,\"owner\":null," +
                   "\"stale_owner\":false,\"holder_pid\":\"" + std::to_string(::getpid()) + "\"}");
  }
  BOOST_TEST(runner::run_state(run).state == "new");  // the lock went with its holder
}

BOOST_AUTO_TEST_CASE(a_run_writes_its_folder_and_learns) {
  testing::TempDir dir;
  const train::Config config = train::load_config(
      std::string(ATTOGRAD_SOURCE_DIR) + "/configs/reverse.json",
      {"model.d_model=16", "model.n_heads=2", "model.n_layers=2", "model.d_ff=32", "train.steps=40",
       "train.batch_size=16", "train.warmup=5", "train.eval_every=20", "train.log_every=5",
       "train.eval_size=32", "output.attention_every=10", "output.checkpoint_every=15", "train.threads=1"});
  analysis::RunStudy run_study(config, dir.file("run"));  // the dumps, scores and report of the run
  const train::TrainResult r = train::train_model(config, {dir.file("run"), false, nullptr, {&run_study}});
  BOOST_TEST(r.step == 40);
  BOOST_TEST(run_study.score_table().find("prev_tok") != std::string::npos);
  BOOST_TEST(!r.interrupted);
  for (const char* f : kFiles) BOOST_TEST(std::filesystem::exists(dir.file("run/" + std::string(f))), f);
  const std::vector<double> l = losses(dir.file("run/metrics.jsonl"));
  BOOST_REQUIRE(l.size() >= 2);
  BOOST_TEST(l.back() < l.front());  // it learns something in 40 steps
  // The resolved config round-trips: what the run folder says is what ran.
  std::ifstream in(dir.file("run/config.json"));
  BOOST_TEST((train::from_json(nlohmann::json::parse(in)) == config));
}
