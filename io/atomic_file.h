// The one way the program writes a file: AtomicFile writes a new temporary file in the target's folder
// (created with O_EXCL and O_NOFOLLOW, so a planted file or symlink is never written through), fsyncs it,
// renames it over the target and fsyncs the folder. A reader, a crash or a full disk therefore leaves either
// the old file or the new one, never a mix. Used for checkpoints, config.json, scores.json, attention
// dumps, SVGs and report.html. Not for metrics.jsonl, which grows by appends (train/metrics_log.h).
#pragma once

#include <stdexcept>
#include <string>

namespace io {

// A write that failed for a reason outside the input: disk full, I/O error, permissions. Commands exit 1
// on it (a bad input is exit 2).
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicFile {
 public:
  // Creates PATH's missing parent folders and a fresh temporary file beside PATH. PATH itself, when it
  // exists, must be a regular file: a symbolic link, folder, device or FIFO there is never replaced
  // (std::runtime_error "PATH: is a symbolic link, not a regular file"; write_user_file follows links).
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();  // removes the temporary file unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t n);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // fsync, rename over PATH, fsync the folder. Every failure throws WriteError("PATH: cannot write: WHY").
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// What AtomicFile(PATH) refuses, checked without writing anything: std::runtime_error "PATH: is a
// symbolic link, not a regular file; not replaced" when something other than a regular file is at PATH.
// A tool checks its outputs with it before long work, so that a bad output fails first and alone.
void check_replaceable(const std::string& path);

// The most any text file the program reads may hold unless its reader says otherwise: far above a real
// run's files (a metrics.jsonl of a million steps is ~150 MB), and a bound on /dev/zero or a wrong path.
constexpr size_t kMaxTextFileBytes = size_t{1} << 30;

// "a FIFO", "a character device", "a folder", ...: what a file of this st_mode is, for error lines.
std::string file_kind(unsigned mode);

// Opens PATH (following symlinks) for reading, refusing without blocking anything but a regular file:
// std::runtime_error "PATH: is a FIFO, not a regular file". Returns -1 with errno set when PATH cannot be
// opened, for the caller's message. Every text file the program reads goes through it.
int open_regular_file(const std::string& path);

// The whole file as bytes; throws std::runtime_error("PATH: cannot read: REASON") on failure, "PATH: is a
// FIFO, not a regular file" for anything but a regular file, and "PATH: larger than N MiB, not a WHAT"
// when it holds more than max_bytes (read stops there).
std::string read_text_file(const std::string& path, size_t max_bytes = kMaxTextFileBytes,
                           const char* what = "text file");

// AtomicFile in one call.
void write_text_file_atomically(const std::string& path, const std::string& text);

// A file whose path the user names (--svg, --slurm), written as a shell redirection would: a symbolic
// link is followed and its target written (atomically, through AtomicFile), never replaced; a folder,
// device, FIFO or socket, there or at the link's end, is refused with std::runtime_error (exit 2)
// "PATH: is a folder, expected a file to write" and left alone.
void write_user_file(const std::string& path, const std::string& text);

// Writes all n bytes to the open file `fd` (retrying short writes and EINTR); a failure throws
// WriteError("PATH: cannot write: WHY"). AtomicFile and the metrics.jsonl appender both write through it.
void write_all(int fd, const void* bytes, size_t n, const std::string& path);

// fsyncs PATH's folder, so a rename or a new file in it survives a power cut. Throws WriteError.
void sync_parent_directory(const std::string& path);

}  // namespace io
