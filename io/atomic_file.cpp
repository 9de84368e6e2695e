#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/run_layout.h"

namespace io {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw WriteError(path + ": cannot write: " + why);
}

// Unique within the process (and, with the pid, across processes): two writers never share a temp file.
std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return layout::temp_file(path, ::getpid(), counter++);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(temp_name(path)) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) fail(path, ec.message());
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path, std::string(std::strerror(errno)) + " (temporary file " + tmp_ + ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void write_all(int fd, const void* bytes, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(path, w < 0 ? std::strerror(errno) : "no progress");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::write(const void* bytes, size_t n) {
  write_all(fd_, bytes, n, path_);
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail(path_, std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    ::unlink(tmp_.c_str());
    fail(path_, std::strerror(errno));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    fail(path_, std::strerror(err));
  }
  sync_parent_directory(path_);
}

void sync_parent_directory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open its folder to sync it: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems cannot sync a folder (EINVAL); the rename is then as durable as they allow.
  if (rc != 0 && err != EINVAL) fail(path, std::string("cannot sync its folder: ") + std::strerror(err));
}

std::string read_text_file(const std::string& path, size_t max_bytes, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= max_bytes && in.read(buffer, sizeof buffer).gcount() > 0)
    text.append(buffer, static_cast<size_t>(in.gcount()));
  if (in.bad()) throw std::runtime_error(path + ": cannot read: I/O error");
  if (text.size() > max_bytes)
    throw std::runtime_error(path + ": larger than " + std::to_string(max_bytes >> 20) + " MiB, not a " +
                             what);
  return text;
}

void write_text_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text);
  file.commit();
}

}  // namespace io
