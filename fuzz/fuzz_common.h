// Shared by the fuzz targets: a private scratch folder for the file-reading parsers, and the check that
// every error the program would print is one printable line.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

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

// The error rule: one line, no control bytes (a terminal would act on them). Aborts, so libFuzzer keeps
// the input, when an error message breaks it.
inline void check_one_line(const std::exception& e) {
  const std::string what = e.what();
  for (unsigned char c : what) {
    if (c < 0x20 || c == 0x7f) {
      std::fprintf(stderr, "error message with control byte 0x%02x: %s\n", c, what.c_str());
      std::abort();
    }
  }
  if (what.empty()) {
    std::fprintf(stderr, "empty error message\n");
    std::abort();
  }
}

}  // namespace fuzz
