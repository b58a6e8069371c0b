// One call of train() (trainer/train.h), split by what each part does:
//   train_setup.cpp  the setup: ranks and groups, data, model, optimizer, the checkpoint to resume
//                    from, the run directory, metrics.jsonl and log.txt, the opening log lines;
//   train_step.cpp   one training step: micro-batches, gradient sync, clipping, the skip and stop
//                    decisions, the AdamW update;
//   train.cpp        the loop, with the step's metrics and progress line, evaluation and checkpoint saves.
// The members are declared in the order the setup makes them, and are destroyed in the reverse order.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/peak_memory.h"
#include "layers/model.h"
#include "parallel/process_grid.h"
#include "parallel/process_groups.h"
#include "trainer/adamw.h"
#include "trainer/metrics.h"
#include "trainer/run_dir.h"
#include "trainer/run_lock.h"
#include "trainer/runtime.h"
#include "trainer/stop_signal.h"
#include "trainer/train.h"
#include "trainer/train_checkpoint.h"
#include "trainer/train_data.h"

namespace dt {

class DpGradSync;

class TrainRun {
 public:
  // The setup (train_setup.cpp). Everything that can be refused (config, data, memory, the
  // checkpoint to resume from) is checked before the run directory is written.
  TrainRun(const Config& cfg, const TrainOptions& options);
  ~TrainRun();
  TrainRun(const TrainRun&) = delete;
  TrainRun& operator=(const TrainRun&) = delete;

  // The steps after the start (or the resumed checkpoint) up to train.steps, or up to a stop signal.
  TrainSummary run();

 private:
  using Clock = std::chrono::steady_clock;

  // What one step computed, for its metrics line and what comes after it.
  struct StepResult {
    double loss = 0;       // the mean over the micro-batches (and the DP ranks)
    double grad_norm = 0;  // before clipping
    double lr = 0;
    bool skip = false;     // the update was skipped: the loss or the gradient norm is not finite
    bool stop = false;     // a stop signal reached this rank or another
    double seconds = 0;    // the step's wall time
  };

  // train_setup.cpp, in this order.
  void setup_ranks();     // runtime, world, TP x DP grid and groups
  void setup_model();     // data, model, DP gradient sync, AdamW, the loop's counters
  void setup_resume();    // the checkpoint --resume continues from, loaded (under the run lock)
  std::vector<std::string> prepare_run_dir();  // run lock, run directory, config.yaml; returns notes
  void open_reports(const std::vector<std::string>& notes);  // metrics.jsonl, log.txt, the opening lines
  void take_lock();

  // train_step.cpp
  StepResult step(int step, const StopSignal& stop_signal);

  // train.cpp
  void report_step(int step, const StepResult& r);  // metrics line, skip message, progress line
  void evaluate(int step);
  void save_checkpoint(int step);
  double seconds_since(Clock::time_point t) const;
  double time_s() const;  // the run's time so far, with the time before a resumed checkpoint

  const Config& cfg_;
  const TrainConfig& tc_;
  const TrainOptions& options_;

  // Ranks: world = tp x dp (docs/parallel.md, "The trainer under mpirun").
  Runtime runtime_;
  Context& ctx_;
  std::unique_ptr<Communicator> own_world_;  // when options.world is null
  Communicator* world_ = nullptr;
  std::optional<ProcessGrid> grid_;
  ProcessGroups groups_;
  int tp_ = 1, dp_ = 1;
  bool writer_ = false;  // world rank 0: the one rank that writes the run directory

  // Data, model and optimizer.
  int B_ = 0, T_ = 0, A_ = 0;  // train.batch_size, seq_len, grad_accum
  int64_t tokens_per_step_ = 0;
  TrainData data_;
  DataLoader* train_loader_ = nullptr;
  DataLoader* val_loader_ = nullptr;  // null without validation
  TrainSummary summary_;
  std::filesystem::path dir_;
  std::string ckpt_dir_;
  std::optional<Model> model_;
  ParamStore* params_ = nullptr;
  bool zero1_ = false;
  std::unique_ptr<DpGradSync> dp_sync_;
  bool overlap_ = false;  // the gradient sync overlaps the last backward
  GradsReady grads_ready_;
  std::optional<AdamW> opt_;
  CheckpointState state_;  // the loop's counters, as a checkpoint stores them

  // Run directory and reports.
  std::unique_ptr<RunLock> lock_;
  ResumePoint resume_;
  double time_offset_ = 0;  // time_s of the run before the resumed checkpoint
  std::optional<MetricsWriter> metrics_;
  std::optional<RunLog> log_;

  // The loop.
  std::vector<int32_t> inputs_, targets_;
  PeakMemory peak_memory_;  // metrics.jsonl's peak_mem_gib
  Clock::time_point start_;
  double train_seconds_ = 0;  // time in training steps, evaluations and saves left out, for the rate
  int saved_step_ = -1;       // the step of the last checkpoint this call saved
};

}  // namespace dt
