#include "trainer/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace dt {

namespace {

// The text of the lock file, trimmed; "unknown" when it is empty or unreadable.
std::string read_owner(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "an unknown process" : s;
}

void write_owner(int fd, const std::string& path) {
  const std::string text = run_lock_owner() + "\n";
  const bool ok = ::ftruncate(fd, 0) == 0 &&
                  ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  DT_CHECK(ok, "cannot write the run lock '{}': {}; check that the run directory is writable", path,
           std::strerror(errno));
}

}  // namespace

std::string run_lock_owner() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  return "pid " + std::to_string(::getpid()) + " host " + host;
}

RunLock::RunLock(const std::string& run_dir) : path_((std::filesystem::path(run_dir) / ".lock").string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  DT_CHECK(fd_ >= 0, "cannot open the run lock '{}': {}; check that the run directory is writable", path_,
           std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string owner = err == EWOULDBLOCK ? read_owner(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    DT_CHECK(err != EWOULDBLOCK,
             "the run directory '{}' is in use by another training process ({}, lock file {}); wait for it to end "
             "or stop it (kill <pid> on that host) before --resume, or use another --run-dir",
             run_dir, owner, path_);
    DT_FAIL("cannot lock the run lock '{}': {}; the file system of the run directory must support flock",
            path_, std::strerror(err));
  }
  write_owner(fd_, path_);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race a new holder)
}

}  // namespace dt
