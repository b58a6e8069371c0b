// The gradient steps between the backward and the update under tensor parallelism (docs/parallel.md,
// "Tensor parallelism in the layers"), shared by the trainer (trainer/train_step.cpp) and bench/bench_train.cpp:
//   - the TP sum of the partial gradients of replicated parameters;
//   - the clipping factor (and clip_grad_norm) over a TP-split model, every parameter counted once.
// (The DP mean is DpGradSync, parallel/dp_grads.h; the ZeRO-1 norm grad_clip_factor_zero1, trainer/adamw.h.)
#pragma once

#include "core/context.h"
#include "layers/params.h"
#include "parallel/communicator.h"
#include "trainer/adamw.h"

namespace dt {

// The gradient of a replicated parameter that sees only this rank's heads
// (ParamInfo::tp_partial_grad) summed over TP, so that every rank holds the whole gradient; slots
// [first, end). Each sum's wait() orders what follows (the DP bucket holding it) without blocking
// the host on the GPU.
void tp_sum_partial_grads(Communicator& tp, ParamStore& params, int first, int end);

// grad_clip_factor (trainer/adamw.h) over a model split by TP: the split parameters' squares summed
// over TP, the replicated ones (the same on every rank) taken once. The norm before clipping and the
// factor (max_norm / (norm + 1e-6) when that is below 1, else 1; max_norm <= 0 or a NaN norm: 1),
// the same on every TP rank; the gradients are not touched (AdamW::step takes the factor).
GradClip grad_clip_factor_tp(Context& ctx, const ParamStore& params, Communicator& tp, double max_norm);
// The same with every gradient scaled by the factor; returns the norm.
double clip_grad_norm_tp(Context& ctx, ParamStore& params, Communicator& tp, double max_norm);

}  // namespace dt
