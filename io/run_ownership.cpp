#include "io/run_ownership.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"

namespace io {

namespace fs = std::filesystem;

namespace {

// The holder's pid as it wrote it into the lock file, or "unknown" while it is still writing it.
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  const bool digits = !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos;
  return digits ? pid : "unknown";
}

}  // namespace

FolderLock::FolderLock(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw WriteError(dir + ": cannot create the folder: " + ec.message());
  const std::string path = layout::folder_lock(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    if (errno == ELOOP) throw std::runtime_error(path + ": is a symbolic link, not the folder's lock file");
    throw WriteError(path + ": cannot write: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(path + ": is " + file_kind(st.st_mode) + ", not the folder's lock file");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = errno == EWOULDBLOCK ? holder_pid(fd_) : "";
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw WriteError(path + ": cannot lock: " + std::strerror(err));
    throw std::runtime_error(dir + ": in use by another attograd process (pid " + pid +
                             "); wait for it to end, or use another folder");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0) throw WriteError(path + ": cannot write: " + std::strerror(errno));
  write_all(fd_, pid.data(), pid.size(), path);
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

std::string folder_lock_holder(const std::string& dir) {
  const std::string path = layout::folder_lock(dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string holder;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_SH | LOCK_NB) != 0 &&
      errno == EWOULDBLOCK)
    holder = holder_pid(fd);
  ::close(fd);  // releases the shared lock taken when nobody held it
  return holder;
}

RunLock::RunLock(const std::string& run) : lock_(run) {
  check_run_entries(run);
}

bool is_run_folder(const std::string& run) {
  struct stat st {};
  return ::lstat(layout::run_marker(run).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool check_new_run_folder(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    if (errno == ENOTDIR) throw std::runtime_error(dir + ": a part of the path is a file, expected folders");
    throw std::runtime_error(dir + ": cannot use as a run folder: " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(dir + ": is " + file_kind(st.st_mode) + ", expected a run folder");
  if (is_run_folder(dir)) return true;
  // Empty but for the lock file, which a writer that found the folder empty may already have made.
  std::error_code ec;
  bool empty = true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    empty = empty && it->path().filename() == fs::path(layout::folder_lock(dir)).filename();
  const std::string marker = fs::path(layout::run_marker(dir)).filename().string();
  struct stat checkpoint {};
  // A run trained before run folders had a marker: --resume adopts it (and writes the marker).
  if (::lstat(layout::model_checkpoint(dir).c_str(), &checkpoint) == 0 && S_ISREG(checkpoint.st_mode))
    throw std::runtime_error(dir + ": holds a checkpoint but no " + marker +
                             " marker; --resume it to adopt it as a run, or give a new or empty folder");
  if (!empty || ec)
    throw std::runtime_error(dir + ": not empty and not a run folder (no " + marker +
                             "); give a new or empty folder, attograd never writes into other folders");
  return false;
}

void mark_run_folder(const std::string& run) {
  if (is_run_folder(run)) return;
  write_text_file_atomically(
      layout::run_marker(run),
      "This folder is an attograd run folder (docs/architecture.md \"The run folder\").\n");
}

void check_run_entries(const std::string& run) {
  std::vector<std::string> entries = layout::run_entries(run);
  entries.push_back(layout::train_log(run));
  entries.push_back(layout::run_marker(run));
  entries.push_back(layout::slurm_owner(run));
  const std::vector<std::string> folders = layout::run_subfolders(run);
  for (const std::string& path : entries) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    const bool folder = std::find(folders.begin(), folders.end(), path) != folders.end();
    if (S_ISLNK(st.st_mode) || (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
      throw std::runtime_error(path + ": is " + file_kind(st.st_mode) + ", expected " +
                               (folder ? "the run's own folder" : "a regular file") +
                               " (a run folder's entries are never followed or replaced; remove it)");
  }
}

void check_folder_below_run(const std::string& run, const std::string& folder) {
  const std::string prefix = run + "/";
  if (folder.compare(0, prefix.size(), prefix) != 0)
    throw std::invalid_argument(folder + ": expected a folder below the run folder " + run);
  std::string path = run;
  size_t at = prefix.size();
  while (at < folder.size()) {
    const size_t end = std::min(folder.find('/', at), folder.size());
    path += "/" + folder.substr(at, end - at);
    at = end + 1;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;  // not there yet: created by the writer, below RUN
    if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
      throw std::runtime_error(
          path + ": is " + file_kind(st.st_mode) +
          ", expected the run's own folder (a run folder's entries are never followed or "
          "replaced; remove it)");
  }
}

std::optional<SlurmOwner> read_slurm_owner(const std::string& run) {
  const std::string path = layout::slurm_owner(run);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": is " + file_kind(st.st_mode) +
                             ", expected the run's Slurm owner file");
  const nlohmann::json j = parse_json(read_text_file(path), path);
  if (!j.is_object()) json_error(path, "", "expected an object {\"job_name\", \"task\", \"job_id\"}");
  const auto text = [&](const char* key, bool may_be_empty) {
    if (!j.contains(key) || !j[key].is_string() || (!may_be_empty && j[key].get<std::string>().empty()))
      json_error(path, std::string("/") + key, "expected a string");
    return j[key].get<std::string>();
  };
  SlurmOwner owner;
  owner.job_name = text("job_name", false);
  owner.job_id = text("job_id", true);
  if (!j.contains("task") || !j["task"].is_number_integer() || j["task"].get<int64_t>() < 0)
    json_error(path, "/task", "expected the array task's index, an integer >= 0");
  owner.task = j["task"].get<int64_t>();
  // The job id and name go to squeue's command line: digits, and the generated name's characters.
  if (owner.job_id.find_first_not_of("0123456789") != std::string::npos)
    json_error(path, "/job_id", "expected a Slurm job id (digits), got \"" + owner.job_id + "\"");
  if (owner.job_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
      std::string::npos)
    json_error(path, "/job_name", "expected letters, digits, - and _");
  return owner;
}

void write_slurm_owner(const std::string& run, const SlurmOwner& owner) {
  const nlohmann::ordered_json j = {
      {"job_name", owner.job_name}, {"task", owner.task}, {"job_id", owner.job_id}};
  write_text_file_atomically(layout::slurm_owner(run), j.dump() + "\n");
}

void remove_slurm_owner(const std::string& run) {
  std::error_code ec;
  std::filesystem::remove(layout::slurm_owner(run), ec);
  if (ec) throw WriteError(layout::slurm_owner(run) + ": cannot remove: " + ec.message());
}

void remove_stale_temp_files(const std::string& run) {
  std::vector<std::string> folders = layout::run_subfolders(run);
  folders.insert(folders.begin(), run);
  for (const std::string& folder : folders) {
    // O_NOFOLLOW: a subfolder replaced by a link to elsewhere is not looked into.
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      continue;
    }
    while (const dirent* e = ::readdir(d)) {
      struct stat st {};
      // Only regular files (or links, removed themselves, never their targets): unlinkat does not follow.
      if (layout::is_temp_file(e->d_name) && ::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
        ::unlinkat(fd, e->d_name, 0);
    }
    ::closedir(d);
  }
}

}  // namespace io
