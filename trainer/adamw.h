// AdamW with decoupled weight decay, PyTorch's torch.optim.AdamW semantics:
//   p <- p * (1 - lr * wd)                      (only where ParamInfo::decay)
//   m <- b1 m + (1 - b1) g
//   v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// with t the 1-based step count. The moments live in one Arena ("optimizer"), in the
// parameters' dtype, as "m/<name>" and "v/<name>" (checkpoints store them under those names).
//
// Also the global gradient norm and clipping, PyTorch's clip_grad_norm_:
//   norm = sqrt(sum over all grads of g^2);  g *= max_norm / (norm + 1e-6) when that is < 1.
#pragma once

#include <cstdint>

#include "core/arena.h"
#include "core/context.h"
#include "layers/params.h"

namespace dt {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(ParamStore& params, AdamWConfig cfg);

  // One update of every parameter from its gradient in `params`, at learning rate `lr`: one fused
  // adamw_update over all of them (kernels/ops.h), which on the GPU also rewrites the bf16 copies.
  void step(Context& ctx, double lr);
  void step(double lr);  // CPU parameters

  int64_t steps_done() const { return t_; }
  void set_steps_done(int64_t t) { t_ = t; }  // when the moments come from a checkpoint
  Tensor m(int slot) const { return state_.get(2 * slot); }
  Tensor v(int slot) const { return state_.get(2 * slot + 1); }
  Arena& state() { return state_; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  ParamStore& params_;
  AdamWConfig cfg_;
  Arena state_;
  int64_t t_ = 0;
};

// sqrt(sum of g^2 over every gradient), accumulated in double (fp32 partials on the GPU).
double grad_global_norm(Context& ctx, const ParamStore& params);
double grad_global_norm(const ParamStore& params);  // on the parameters' device, default stream

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1; max_norm <= 0 disables.
// Returns the norm before clipping.
double clip_grad_norm(Context& ctx, ParamStore& params, double max_norm);
double clip_grad_norm(ParamStore& params, double max_norm);

}  // namespace dt
