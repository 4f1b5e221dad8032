// A job's hold on its checkpoint directory. Two jobs writing one directory would replace each
// other's checkpoints and both exit 0; the second is refused instead, with who holds it.
//
// The hold is an exclusive flock(2) on DIR/.strata-lock, taken by the rank that writes state.json
// (rank 0) when the trainer starts and kept until the process ends: the kernel lets go when a job
// dies however it dies, so a killed job leaves no lock behind (the file stays, unlocked). The
// file names the holder (host, pid, start time) for the refusal. flock works on local disks and
// NFSv4; a file system that ignores it ignores the lock too.
#pragma once

#include <filesystem>
#include <memory>

namespace strata::executor {

class CheckpointDirectoryLock {
 public:
  // Takes the lock, or throws schemas::InputError(DIR, "", "in use by another job: host H,
  // pid P, since T ...") when another process holds it, or (DIR, "", "cannot write: ...") when
  // the lock file cannot be created (a read-only directory: found out before the first step).
  explicit CheckpointDirectoryLock(const std::filesystem::path& directory);
  ~CheckpointDirectoryLock();
  CheckpointDirectoryLock(const CheckpointDirectoryLock&) = delete;
  CheckpointDirectoryLock& operator=(const CheckpointDirectoryLock&) = delete;

  static constexpr const char* kFileName = ".strata-lock";

 private:
  int descriptor_ = -1;
};

// This process's hold on `directory`: the lock, taken on first use and shared by every trainer
// of the process that writes there (a run and the run resuming it in one test program are one
// job), released when the last of them lets go.
std::shared_ptr<CheckpointDirectoryLock> hold_checkpoint_directory(
    const std::filesystem::path& directory);

}  // namespace strata::executor
