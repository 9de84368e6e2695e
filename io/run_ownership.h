// What makes a folder a run folder the program owns (docs/architecture.md "The run folder"): its marker,
// the one-writer lock, the check that nothing planted in it is followed, and the cleanup of stale
// temporary files, which stays inside the run's own folders. The paths are io/run_layout.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace io {

// An advisory lock (flock) on DIR/.attograd-lock, held from construction to destruction by every writer of
// a run folder or a sweep folder. Creates DIR when missing. A folder another process holds is refused at
// once: std::runtime_error "DIR: in use by another attograd process (pid N); wait for it to end"; the
// lock file cannot be a symlink (O_NOFOLLOW). A folder that cannot be created or written is a WriteError.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// The pid (or "unknown") of the process that holds DIR's FolderLock now, or "" when none does. Creates
// nothing: a folder without a lock file is not held. A lock file that is a link is not held by anyone.
std::string folder_lock_holder(const std::string& dir);

// FolderLock on a run folder, then check_run_entries: what every writer of a run folder holds.
class RunLock {
 public:
  explicit RunLock(const std::string& run);

 private:
  FolderLock lock_;
};

// Whether RUN holds the run marker (a regular file, not a link to one).
bool is_run_folder(const std::string& run);

// For a new run in `dir`: nothing there, an empty folder or a run folder is fine (returns whether it is a
// run folder); anything else throws one line naming `dir`: a file, device or FIFO, or a folder that holds
// something but is not a run ("not empty and not a run folder").
bool check_new_run_folder(const std::string& dir);

// Creates RUN and writes its marker (the caller holds its lock).
void mark_run_folder(const std::string& run);

// Throws std::runtime_error naming the path when one of the run's own entries (io::layout::run_entries,
// train.log, the marker) is a symbolic link, or is there but is not what it should be (a folder, a
// regular file): the program never writes through something planted in its run folder.
void check_run_entries(const std::string& run);

// Throws std::runtime_error naming the path when `folder` (a path below RUN: RUN/a/b/...) or a folder
// between RUN and it is a symbolic link, or is there but is not a folder: a writer checks every level of
// the folder it is about to write in, before writing anything. Levels not there yet are fine (the writer
// creates them).
void check_folder_below_run(const std::string& run, const std::string& folder);

// The Slurm array task that owns a run (io::layout::slurm_owner): the array's job name (unique per script
// `sweep --slurm` generates), the task's index in it, and its SLURM_JOB_ID once it started (empty while
// queued). The generated script writes the same JSON with printf: keep the two in step.
struct SlurmOwner {
  std::string job_name;
  int64_t task = 0;
  std::string job_id;
};

// RUN's owner, or nothing when RUN has no owner file. A file that is not the JSON above (or a link) throws
// one line naming it and the field.
std::optional<SlurmOwner> read_slurm_owner(const std::string& run);

// Writes RUN's owner file atomically (the caller holds the sweep folder's lock).
void write_slurm_owner(const std::string& run, const SlurmOwner& owner);

// Removes RUN's owner file, if any (a stale one: its job ended without removing it).
void remove_slurm_owner(const std::string& run);

// Removes the temporary files (io::layout::is_temp_file) a killed writer left in RUN and in its own
// subfolders (io::layout::run_subfolders), and nowhere else: no deeper folder, no symlink followed.
void remove_stale_temp_files(const std::string& run);

}  // namespace io
