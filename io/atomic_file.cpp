#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

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

void check_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": is " + file_kind(st.st_mode) + ", not a regular file; not replaced");
}

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(temp_name(path)) {
  const fs::path target(path);
  std::error_code ec;
  check_replaceable(path);
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

std::string file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

int open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0) {
    const int err = errno;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))  // a socket cannot be opened (ENXIO)
      throw std::runtime_error(path + ": is " + file_kind(st.st_mode) + ", not a regular file");
    errno = err;
    return -1;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = file_kind(st.st_mode);
    ::close(fd);
    throw std::runtime_error(path + ": is " + kind + ", not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::string read_text_file(const std::string& path, size_t max_bytes, const char* what) {
  const int fd = open_regular_file(path);
  if (fd < 0) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  bool failed = false;
  while (text.size() <= max_bytes) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed = n < 0;
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  const int err = errno;
  ::close(fd);
  if (failed) throw std::runtime_error(path + ": cannot read: " + std::strerror(err));
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

void write_user_file(const std::string& path, const std::string& text) {
  // Follow the links as open(2) would (relative targets from their link's folder), at most 40 deep.
  fs::path target(path);
  struct stat st {};
  for (int depth = 0; ::lstat(target.c_str(), &st) == 0 && S_ISLNK(st.st_mode); ++depth) {
    std::error_code ec;
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || depth == 40) throw std::runtime_error(path + ": cannot follow the symbolic link");
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": is " + file_kind(st.st_mode) +
                             (target.string() == path ? "" : " (" + target.string() + ")") +
                             ", expected a file to write");
  write_text_file_atomically(target.string(), text);
}

}  // namespace io
