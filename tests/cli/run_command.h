// Runs the attograd program for the CLI tests: exit code, stdout and stderr of one invocation.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `ATTOGRAD_BINARY args` through the shell (args are given quoted as needed) from the repo root.
inline CommandResult run_attograd(const std::string& args) {
  static int counter = 0;
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("attograd-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                               .string();
  const std::string cmd = std::string("cd '") + ATTOGRAD_SOURCE_DIR + "' && '" + ATTOGRAD_BINARY + "' " +
                          args + " >'" + base + ".out' 2>'" + base + ".err'";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(base + ".out");
  r.err = read_all(base + ".err");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

}  // namespace testing
