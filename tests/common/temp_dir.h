// A fresh, empty folder for one test, removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace testing {

struct TempDir {
  std::filesystem::path dir;

  // Unique per process and per instance: ctest runs test programs in parallel.
  explicit TempDir(const std::string& prefix = "attograd-test") {
    static int counter = 0;
    dir = std::filesystem::temp_directory_path() /
          (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;  // a test may have made the folder read-only: give it back before removing it
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                 ec);
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace testing
