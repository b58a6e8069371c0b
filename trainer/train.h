// The training loop, on the CPU or the GPU (run.device; docs/architecture.md, "From a YAML config to
// a kernel launch"). Each step:
//   zero grads; train.grad_accum times: forward and backward of a micro-batch of batch_size
//   sequences (the gradient of the mean loss over all of them accumulates); global grad norm and
//   clipping; AdamW at the scheduled lr — unless the loss or the gradient norm is not finite, in
//   which case the update is skipped (the step still counts) and train.max_skips_in_a_row skips in
//   a row stop the run; validation every train.eval_every steps and after the last one; a
//   checkpoint every train.checkpoint_every steps and after the last one (trainer/train_checkpoint.h).
// The run directory gets config.yaml (the resolved config), metrics.jsonl (one JSON object per
// step / evaluation), log.txt (what was printed) and checkpoints/. Rank 0 holds an exclusive lock
// on <run dir>/.lock for the whole run (trainer/run_lock.h): a second process on the same run
// directory is refused.
//
// SIGTERM or SIGINT ends the run after the current step with a checkpoint (trainer/stop_signal.h).
//
// Resuming (TrainOptions::resume) restores parameters, AdamW's moments, the step, the tokens seen
// and the data cursor, so a resumed run repeats the losses of an uninterrupted one bit for bit;
// metrics.jsonl and log.txt are appended to, after dropping metrics lines past the checkpoint's step.
#pragma once

#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "layers/params.h"
#include "parallel/communicator.h"
#include "trainer/config.h"

namespace dt {

struct TrainOptions {
  std::string run_dir;          // empty: run.dir / run.name
  bool overwrite = false;       // replace an earlier run (its metrics and checkpoints) in the run directory
  bool resume = false;          // continue from a checkpoint: resume_from, or the newest one in the run directory
  std::string resume_from;      // a checkpoint file; empty: the newest complete one in <run dir>/checkpoints
  std::FILE* console = stderr;  // messages and the progress line; nullptr: log.txt only
  // Called every step after the backward passes, before the norm, clipping and update, with the
  // step's summed gradients in `params` (params.grad(...)): a place to inspect gradients or to
  // inject faults (tests/trainer/test_nan.cpp poisons a gradient here). Empty: not called.
  std::function<void(int step, ParamStore& params)> after_backward;
  // The ranks to train on, split into TP x DP groups by parallel.tp (docs/parallel.md, "Groups"). nullptr: the
  // world of this process (all the ranks mpirun started; one process without mpirun). Only world
  // rank 0 writes the run directory (config, metrics, log, checkpoints).
  Communicator* world = nullptr;
};

struct TrainSummary {
  std::string run_dir;
  int start_step = 0;  // the checkpoint's step when resumed, else 0
  int steps = 0;       // the last step done
  int skipped_steps = 0;  // updates skipped for a non-finite loss or gradient, over the whole run
  double first_loss = std::numeric_limits<double>::quiet_NaN();  // of the first step this call ran
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  double val_loss = std::numeric_limits<double>::quiet_NaN();  // the last evaluation; NaN without one
  double seconds = 0;
  bool stopped_by_signal = false;  // SIGTERM / SIGINT ended the run early, after a checkpoint
  std::string resumed_from;  // the checkpoint file, when resumed
};

// run.dir / run.name, unless `override_dir` is given.
std::string run_dir_of(const Config& cfg, const std::string& override_dir);

// The checkpoint a `--resume` without a file continues from: the newest complete one in
// <run_dir>/checkpoints. A clear error when there is none.
std::string find_resume_checkpoint(const std::string& run_dir);

TrainSummary train(const Config& cfg, const TrainOptions& options);

}  // namespace dt
