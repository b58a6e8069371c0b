// A `deltatron` child process for the tests that kill or signal a run (test_resume.cpp,
// test_run_lock.cpp, test_stop_signal.cpp): stdout to /dev/null, stderr to a log file.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

namespace dt::trainer_testing {

// A `deltatron train` child process.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    std::string bin = DELTATRON_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << bin;
  }
  ~Child() {
    if (running()) kill_now();
  }
  // True while the process runs; records its exit status when it has ended.
  bool running() {
    if (done_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) done_ = true, status_ = status;
    return !done_;
  }
  void kill_now() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    done_ = true;
    status_ = status;
  }
  // Sends `sig` (SIGTERM, SIGINT) and waits for the process to end.
  void signal_and_wait(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    done_ = true;
    status_ = status;
  }
  pid_t pid() const { return pid_; }
  int status() const { return status_; }
  bool exited_ok() const { return done_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  int status_ = 0;
};

}  // namespace dt::trainer_testing
