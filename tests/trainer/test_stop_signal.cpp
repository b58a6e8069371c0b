// SIGTERM / SIGINT to `deltatron train` (trainer/stop_signal.h): the run finishes its step, saves a
// checkpoint at that step, says so and exits 0; `--resume` then ends with bitwise the losses of an
// uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "trainer/train_checkpoint.h"
#include "child_process.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

// The number of lines of `path` (0 while it does not exist).
int count_lines(const std::string& path) {
  const std::string text = read_text(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Starts a run, sends `sig` once it has done a few steps, and checks the stop; returns the step it stopped at.
int stop_with_signal(const ScratchDir& dir, const std::string& yaml, const std::string& run, int sig, int steps) {
  Child child({"train", "--config", yaml, "--run-dir", run}, dir / "stopped.txt");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_lines(run + "/metrics.jsonl") < 3 && child.running() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(child.running()) << "the run ended before the signal; raise train.steps";
  child.signal_and_wait(sig);
  const std::string err = read_text(dir / "stopped.txt");
  EXPECT_TRUE(child.exited_ok()) << "status " << child.status() << ":\n" << err;
  std::vector<CheckpointFile> ckpts = list_checkpoints(run + "/checkpoints");
  EXPECT_EQ(ckpts.size(), 1u) << err;
  if (ckpts.empty()) return -1;
  const int stopped = static_cast<int>(ckpts.back().step);
  EXPECT_LT(stopped, steps);
  EXPECT_EQ(read_metrics(run).back()["step"].get<int>(), stopped) << "the last step done is the checkpoint's";
  const std::string said = fmt::format("stopped by {} after step {}/{}: checkpoint saved to {}",
                                       sig == SIGTERM ? "SIGTERM" : "SIGINT", stopped, steps, ckpts.back().path);
  EXPECT_NE(err.find(said), std::string::npos) << err;
  return stopped;
}

TEST(StopSignal, SigtermCheckpointsExitsZeroAndResumeMatchesTheStraightRun) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 150;  // long enough for the signal to land mid-run
  cfg.train.eval_every = 0;
  cfg.train.checkpoint_every = 0;  // the signal's checkpoint is the only one
  const std::string yaml = write_config(dir / "run.yaml", cfg);
  RunResult r = run_deltatron("train --config '" + yaml + "' --run-dir '" + dir / "straight" + "'", dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const int stopped = stop_with_signal(dir, yaml, dir / "stopped", SIGTERM, cfg.train.steps);
  ASSERT_GT(stopped, 0);
  r = run_deltatron("train --config '" + yaml + "' --run-dir '" + dir / "stopped" + "' --resume", dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("step {}", stopped)), std::string::npos) << r.err;
  expect_same_bits(values_by_step(read_metrics(dir / "straight"), "loss"),
                   values_by_step(read_metrics(dir / "stopped"), "loss"), "loss");
  expect_same_bits(values_by_step(read_metrics(dir / "straight"), "val_loss"),
                   values_by_step(read_metrics(dir / "stopped"), "val_loss"), "val_loss");
}

TEST(StopSignal, SigintStopsTheSameWay) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 150;
  cfg.train.eval_every = 0;
  cfg.train.checkpoint_every = 0;
  const std::string yaml = write_config(dir / "run.yaml", cfg);
  EXPECT_GT(stop_with_signal(dir, yaml, dir / "run", SIGINT, cfg.train.steps), 0);
}

}  // namespace
}  // namespace dt
