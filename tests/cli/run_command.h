// Runs the attograd program for the CLI tests: exit code, stdout and stderr of one invocation.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

// `s` as one word for the shell, whatever it holds.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `ATTOGRAD_BINARY args` through the shell (args are given quoted as needed) from the repo root.
inline CommandResult run_attograd(const std::string& args) {
  static int counter = 0;
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("attograd-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                               .string();
  const std::string cmd = "cd " + shell_quote(ATTOGRAD_SOURCE_DIR) + " && " + shell_quote(ATTOGRAD_BINARY) +
                          " " + args + " >" + shell_quote(base + ".out") + " 2>" + shell_quote(base + ".err");
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
