// One training process per run directory: an exclusive flock(2) on <run dir>/.lock, held for the
// whole run. The file holds "pid <PID> host <HOST>" of the holder, so that a second process (a
// requeued job started beside its original, a typo in --run-dir) is refused with who holds it.
// The kernel releases the lock when the holder dies, so a lock file left by a killed process does
// not block `--resume`: only a live holder does.
#pragma once

#include <string>

namespace dt {

class RunLock {
 public:
  // Takes the lock on `run_dir`/.lock (creating the file); the directory must exist. A clear error
  // naming the holder's PID and host when another process holds it.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// "pid <PID> host <HOST>": what the lock file of this process holds.
std::string run_lock_owner();

}  // namespace dt
