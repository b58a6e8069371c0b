// train() and its loop: TrainRun::run, with each step's metrics and progress line, the evaluations
// and the checkpoint saves (trainer/train_run.h). The setup is train_setup.cpp, a step train_step.cpp.
#include "trainer/train.h"

#include <cmath>

#include "parallel/mpi_runtime.h"
#include "trainer/evaluate.h"
#include "trainer/mfu.h"
#include "trainer/train_run.h"

namespace dt {

namespace fs = std::filesystem;

double TrainRun::seconds_since(Clock::time_point t) const {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double TrainRun::time_s() const { return time_offset_ + seconds_since(start_); }

TrainSummary TrainRun::run() {
  // SIGTERM / SIGINT: checkpoint after the current step and return (trainer/stop_signal.h).
  const StopSignal stop_signal;
  const int first_step = static_cast<int>(state_.step) + 1;
  if (first_step > tc_.steps)
    log_->print(fmt::format("nothing to train: the checkpoint is at the last step, train.steps = {}; raise "
                            "train.steps (--set train.steps=N) to continue",
                            tc_.steps));
  const double flops_per_token = model_flops_per_token(*model_, tp_);  // for the MFU of the progress line
  // The ETA goes by the wall time per step so far, evaluations and checkpoint saves included.
  const auto loop_start = Clock::now();
  for (int step = first_step; step <= tc_.steps; ++step) {
    const StepResult r = this->step(step, stop_signal);
    train_seconds_ += r.seconds;
    if (step == first_step) summary_.first_loss = r.loss;
    summary_.last_loss = r.loss;
    summary_.steps = step;
    summary_.skipped_steps = static_cast<int>(state_.skipped_steps);
    report_step(step, r);
    const int done = step - first_step + 1;
    const bool keep = step % cfg_.run.log_every == 0 || step == first_step || step == tc_.steps;
    const double tokens_per_s = static_cast<double>(tokens_per_step_) * done / train_seconds_;
    log_->progress(format_progress({.step = step,
                                    .steps = tc_.steps,
                                    .loss = r.loss,
                                    .lr = r.lr,
                                    .grad_norm = r.grad_norm,
                                    .tokens_per_s = tokens_per_s,
                                    // per GPU: this rank's share of the tokens and of the model FLOPs
                                    .mfu = runtime_.device() == Device::kCPU ? -1.0
                                                                             : mfu(tokens_per_s / dp_, flops_per_token),
                                    .peak_mem_gib = peak_memory_.gib(),
                                    .elapsed_s = time_s(),
                                    .eta_s = seconds_since(loop_start) / done * (tc_.steps - step)}),
                   keep);
    // The evaluation comes before the checkpoint, so that a checkpoint's metrics are complete.
    if (val_loader_ && ((tc_.eval_every > 0 && step % tc_.eval_every == 0) || step == tc_.steps)) evaluate(step);
    if (tc_.checkpoint_every > 0 && (step % tc_.checkpoint_every == 0 || step == tc_.steps)) save_checkpoint(step);
    if (step < tc_.steps && r.stop) {
      if (saved_step_ != step) save_checkpoint(step);
      summary_.stopped_by_signal = true;
      log_->print(fmt::format("stopped by {} after step {}/{}: checkpoint saved to {}; continue the run with the same "
                              "command and --resume",
                              stop_signal.received() ? stop_signal_name(stop_signal.received())
                                                     : "a signal to another rank",
                              step, tc_.steps, (fs::path(ckpt_dir_) / checkpoint_file_name(step)).string()));
      break;
    }
  }
  summary_.seconds = seconds_since(start_);
  if (summary_.steps == 0) summary_.steps = static_cast<int>(state_.step);
  log_->print(fmt::format("done: {} steps in {} | loss {:.4f} -> {:.4f}{}{} | {}", summary_.steps - summary_.start_step,
                          format_duration(summary_.seconds), summary_.first_loss, summary_.last_loss,
                          std::isnan(summary_.val_loss) ? "" : fmt::format(" | val_loss {:.4f}", summary_.val_loss),
                          summary_.skipped_steps ? fmt::format(" | {} updates skipped", summary_.skipped_steps) : "",
                          summary_.run_dir));
  return summary_;
}

// The step's line of metrics.jsonl; a skipped update is reported, and too many in a row end the run.
void TrainRun::report_step(int step, const StepResult& r) {
  nlohmann::ordered_json line = {{"step", step},
                                 {"loss", r.loss},  // a non-finite value is written as null
                                 {"lr", r.lr},
                                 {"grad_norm", r.grad_norm},
                                 {"tokens", state_.tokens_seen},
                                 {"tokens_per_s", static_cast<double>(tokens_per_step_) / r.seconds},
                                 {"time_s", time_s()},
                                 {"peak_mem_gib", peak_memory_.gib()}};
  if (r.skip) {
    line["skipped"] = true;
    line["skips_in_a_row"] = state_.skips_in_a_row;
    line["skipped_steps"] = state_.skipped_steps;
  }
  metrics_->write(line);
  if (!r.skip) return;
  log_->print(fmt::format("step {}/{}: loss {}, gradient norm {}: not finite, update skipped ({} in a row, {} in "
                          "all; train.max_skips_in_a_row = {})",
                          step, tc_.steps, r.loss, r.grad_norm, state_.skips_in_a_row, state_.skipped_steps,
                          tc_.max_skips_in_a_row));
  DT_CHECK(state_.skips_in_a_row < tc_.max_skips_in_a_row,
           "training stopped at step {}: the last {} steps had a non-finite loss or gradient norm (loss {}, "
           "gradient norm {}), train.max_skips_in_a_row = {}; the run has diverged: lower train.lr (now {}), "
           "raise train.warmup_steps or set train.grad_clip, and restart or --resume from a checkpoint before "
           "step {}",
           step, state_.skips_in_a_row, r.loss, r.grad_norm, tc_.max_skips_in_a_row, tc_.lr,
           step - state_.skips_in_a_row + 1);
}

void TrainRun::evaluate(int step) {
  double val = dt::evaluate(*model_, ctx_, *val_loader_, tc_.eval_batches);
  if (ctx_.dp) val = all_reduce_value(*ctx_.dp, val, ReduceOp::kAvg);  // each DP rank saw its own batches
  summary_.val_loss = val;
  metrics_->write({{"step", step}, {"val_loss", val}, {"tokens", state_.tokens_seen}, {"time_s", time_s()}});
  log_->print(fmt::format("eval step {}/{} | val_loss {:.4f}", step, tc_.steps, val));
}

void TrainRun::save_checkpoint(int step) {
  const auto t0 = Clock::now();
  saved_step_ = step;
  if (writer_) make_run_dir(ckpt_dir_);
  std::string path = (fs::path(ckpt_dir_) / checkpoint_file_name(step)).string();
  LoaderCursor cursor = train_loader_->cursor();
  state_.loader_epoch = cursor.epoch;
  state_.loader_position = cursor.position;
  // The DP replicas are identical: DP rank 0's TP group gathers the whole tensors, world rank 0 writes.
  // ZeRO-1: every DP rank first gives its shard of the moments.
  if (grid_->dp_rank() == 0 || opt_->sharded())
    save_train_checkpoint(path, cfg_, *params_, *opt_, state_, ctx_.tp, dp_);
  if (!writer_) return;
  std::error_code ec;
  double mb = static_cast<double>(fs::file_size(path, ec)) / (1 << 20);
  std::vector<std::string> deleted = prune_checkpoints(ckpt_dir_, tc_.keep_last, step);
  std::string pruned;
  for (const std::string& d : deleted) pruned += (pruned.empty() ? "; deleted " : ", ") + d;
  log_->print(fmt::format("checkpoint step {}/{} saved to {} ({:.1f} MB in {:.2f}s){}", step, tc_.steps, path, mb,
                          seconds_since(t0), pruned));
}

TrainSummary train(const Config& cfg, const TrainOptions& options) {
  TrainRun run(cfg, options);
  return run.run();
}

}  // namespace dt
