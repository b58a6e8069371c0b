// One training step: TrainRun::step (trainer/train_run.h).
#include <cmath>

#include "parallel/dp_grads.h"
#include "parallel/mpi_runtime.h"
#include "trainer/grad_sync.h"
#include "trainer/schedule.h"
#include "trainer/train_run.h"

namespace dt {

TrainRun::StepResult TrainRun::step(int step, const StopSignal& stop_signal) {
  const auto t0 = Clock::now();
  ParamStore& params = *params_;
  params.zero_grads();
  double loss_sum = 0;
  for (int micro = 0; micro < A_; ++micro) {
    train_loader_->next(inputs_.data(), targets_.data());
    loss_sum += model_->forward(ctx_, inputs_.data(), targets_.data());
    // grads accumulate: d(mean over the A micro-batches); they are final in the last backward
    model_->backward(ctx_, 1.0 / A_, micro == A_ - 1 ? grads_ready_ : GradsReady());
    peak_memory_.sample();  // activations and gradients are both alive here
  }
  StepResult r;
  r.loss = loss_sum / A_;
  if (tp_ > 1 && !overlap_) tp_sum_partial_grads(*ctx_.tp, params, 0, params.size());
  if (dp_sync_) {
    // The gradient of the mean loss over the global batch (ZeRO-1: of this rank's shard).
    if (overlap_) dp_sync_->finish(); else dp_sync_->all_reduce_mean();
    r.loss = all_reduce_value(*ctx_.dp, r.loss, ReduceOp::kAvg);
  }
  if (options_.after_backward) options_.after_backward(step, params);
  // The clipping factor goes to the update (AdamW::step scales as it reads): the gradients stay
  // unscaled, nothing reads them after the update, and the bits are those of scaling first.
  const GradClip clip = zero1_    ? grad_clip_factor_zero1(ctx_, *opt_, tp_ > 1 ? ctx_.tp : nullptr, tc_.grad_clip)
                        : tp_ > 1 ? grad_clip_factor_tp(ctx_, params, *ctx_.tp, tc_.grad_clip)
                                  : grad_clip_factor(ctx_, params, tc_.grad_clip);
  r.grad_norm = clip.norm;
  r.lr = lr_at_step(step, tc_.steps, tc_.warmup_steps, tc_.lr, tc_.min_lr);
  // A non-finite loss or gradient would poison the weights and both moments for good: skip the
  // update (the batch is still consumed and the step counted, so the schedule stays in place).
  // Every rank takes the same decision (a NaN on one rank is seen by all). So with a stop signal
  // that reached this rank or another: all ranks stop after this step and take part in the
  // checkpoint save. Both flags travel in one all-reduce.
  bool flags[2] = {!std::isfinite(r.loss) || !std::isfinite(r.grad_norm), stop_signal.received() != 0};
  if (world_->size() > 1) any_rank_each(*world_, flags);
  r.skip = flags[0];
  r.stop = flags[1];
  if (r.skip) {
    ++state_.skipped_steps;
    ++state_.skips_in_a_row;
  } else {
    opt_->step(ctx_, r.lr, clip.scale);
    state_.skips_in_a_row = 0;
  }
  r.seconds = seconds_since(t0);
  state_.step = step;
  state_.tokens_seen += tokens_per_step_;
  return r;
}

}  // namespace dt
