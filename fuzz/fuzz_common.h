// Shared by the fuzz targets: a private scratch folder for the file-reading parsers, and the check that
// every error the program would print is one printable line.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "io/printable.h"

namespace fuzz {

// A folder of this process's own under $TMPDIR (or /tmp), made once; removed by the OS's tmp clean-up,
// since libFuzzer exits without running destructors.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/attograd-fuzz-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  return dir;
}

// Replaces the file at `path` with exactly these bytes.
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// The error rule: one line, no control bytes (a terminal would act on them), nothing but UTF-8. Aborts,
// so libFuzzer keeps the input, when an error message breaks it. `Rule::main_escapes` is for readers
// whose messages quote nlohmann's parser text, which leaves DEL and bytes that are not UTF-8 raw: the
// program's main escapes those when it prints (io::printable), so only line breaks and the other C0
// controls are findings there.
enum class Rule { strict, main_escapes };

inline void check_one_line(const std::exception& e, Rule rule = Rule::strict) {
  const std::string what = e.what();
  const bool ok = rule == Rule::strict ? io::is_printable_utf8(what) && what.find('\t') == std::string::npos
                                       : std::none_of(what.begin(), what.end(), [](char c) {
                                           return static_cast<unsigned char>(c) < 0x20;
                                         });
  if (!ok || what.empty()) {
    std::fprintf(stderr, "error message breaks the one-line rule: %s\n", io::printable(what).c_str());
    std::abort();
  }
}

}  // namespace fuzz
