// One training process per run directory (trainer/run_lock.h): a second RunLock, or a second
// `deltatron train` on a run directory in use, is refused with the holder's PID and host; a lock
// file left by a dead process does not block `--resume`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "trainer/run_lock.h"
#include "trainer/train_checkpoint.h"
#include "child_process.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

TEST(RunLock, SecondHolderIsRefusedWithTheFirstsPidAndHost) {
  ScratchDir dir;
  const std::string owner = "pid " + std::to_string(::getpid()) + " host " + hostname();
  EXPECT_EQ(run_lock_owner(), owner);
  {
    RunLock first(dir.str());
    EXPECT_EQ(read_text(dir / ".lock"), owner + "\n");
    try {
      RunLock second(dir.str());
      FAIL() << "a second lock on the same run directory was granted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("is in use by another training process (" + owner + ", lock file"), std::string::npos)
          << what;
      EXPECT_NE(what.find("--run-dir"), std::string::npos) << what;
    }
  }
  RunLock again(dir.str());  // released with its holder
}

TEST(RunLock, LeftoverLockFileOfADeadProcessDoesNotBlock) {
  ScratchDir dir;
  write_text(dir / ".lock", "pid 999999 host gone\n");
  RunLock lock(dir.str());
  EXPECT_EQ(read_text(dir / ".lock"), run_lock_owner() + "\n");
}

// Waits up to `seconds` for `path` to exist.
bool wait_for(const std::string& path, double seconds) {
  for (auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
       std::chrono::steady_clock::now() < until;)
    if (std::filesystem::exists(path)) return true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return false;
}

TEST(RunLock, SecondTrainProcessIsRefusedAndAKilledOnesLockDoesNotBlockResume) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 100000;  // runs until killed
  cfg.train.checkpoint_every = 2;
  cfg.train.eval_every = 0;
  const std::string yaml = write_config(dir / "run.yaml", cfg);
  const std::string run = dir / "run";
  Child first({"train", "--config", yaml, "--run-dir", run}, dir / "first.txt");
  ASSERT_TRUE(wait_for(run + "/checkpoints/step_00000002.h5", 60)) << read_text(dir / "first.txt");

  const std::string holder = "pid " + std::to_string(first.pid()) + " host " + hostname();
  const std::string train = "train --config '" + yaml + "' --run-dir '" + run + "' ";
  RunResult r = run_deltatron(train + "--resume", dir.str());
  expect_cli_error(r, "the run directory '" + run + "' is in use by another training process (" + holder);
  r = run_deltatron(train + "--overwrite", dir.str());
  expect_cli_error(r, holder);
  ASSERT_TRUE(first.running()) << "the refused processes must leave the holder alone";

  first.kill_now();  // SIGKILL: the lock file stays, the lock goes with the process
  ASSERT_TRUE(std::filesystem::exists(run + "/.lock"));
  r = run_deltatron(train + "--resume --set train.steps=" +
                        std::to_string(list_checkpoints(run + "/checkpoints").back().step + 1),
                    dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming from"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dt
