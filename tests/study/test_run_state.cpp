// A run folder's state (study/run_state.h) from the files and locks alone, without training: a missing or
// empty folder is new, a folder that holds something else is refused, a run whose lock another holder has
// is busy (and not without `live`), a checkpoint-less run is new, and the JSON names every fact.
#define BOOST_TEST_MODULE run_state
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
#include "io/run_ownership.h"
#include "study/run_state.h"

BOOST_AUTO_TEST_CASE(new_folders_and_refused_ones) {
  testing::TempDir dir;
  BOOST_TEST(study::run_state(dir.file("missing")).state == "new");
  std::filesystem::create_directories(dir.file("empty"));
  BOOST_TEST(study::run_state(dir.file("empty")).state == "new");
  std::ofstream(dir.file("file")) << "x";
  BOOST_CHECK_THROW(study::run_state(dir.file("file")), std::runtime_error);
  std::filesystem::create_directories(dir.file("other"));
  std::ofstream(dir.file("other/notes.txt")) << "x";
  BOOST_CHECK_THROW(study::run_state(dir.file("other")), std::runtime_error);
  // Without `live`, only the run's files decide: a folder of other things holds no checkpoint.
  BOOST_TEST(study::run_state(dir.file("other"), {false}).state == "new");
}

BOOST_AUTO_TEST_CASE(a_locked_run_is_busy) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  io::mark_run_folder(run);
  BOOST_TEST(study::run_state(run).state == "new");
  BOOST_TEST(io::folder_lock_holder(run).empty());
  {
    const io::RunLock lock(run);  // another open file description: flock refuses this process's probe too
    const findings::RunState s = study::run_state(run);
    BOOST_TEST(s.state == "busy");
    BOOST_TEST(s.holder_pid == std::to_string(::getpid()));
    BOOST_TEST(study::run_state(run, {false}).state == "new");
    const nlohmann::ordered_json j = findings::run_state_to_json(s);
    BOOST_TEST(j.dump() ==
               "{\"path\":\"" + run + "\",\"state\":\"busy\",\"step\":null,\"steps\":null,\"owner\":null," +
                   "\"stale_owner\":false,\"holder_pid\":\"" + std::to_string(::getpid()) + "\"}");
  }
  BOOST_TEST(study::run_state(run).state == "new");  // the lock went with its holder
}
