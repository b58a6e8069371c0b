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
// The trainer does not scale the gradients: grad_clip_factor* give the factor and AdamW::step
// folds it into the update (the same bits as scaling first, one pass over the gradients less).
//
// ZeRO-1 (parallel.zero1): given a DpGradSync in DpGradMode::kShardedMean over the gradient arena,
// each DP rank keeps the moments of its shard only (chunk r of every bucket: 1/dp of them), in two
// flat slots "m" and "v" of the "optimizer" arena: 8 bytes per parameter / dp instead of 8. A step
// updates the shard's fp32 masters, all-gathers the masters over DP and rewrites the bf16 copies. The
// arithmetic per element is the plain optimizer's, so the weights are the same bits as without ZeRO
// given the same gradients. Checkpoints take the moments whole (WholeMoments).
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/context.h"
#include "layers/params.h"
#include "parallel/dp_grads.h"

namespace dt {

// AdamW's moments of every parameter whole (this TP rank's parts), each in a slot of its own and
// laid out like the gradients: what a checkpoint saves and what a load fills before each ZeRO-1
// rank keeps its shard. Two arenas the size of the gradients.
class WholeMoments {
 public:
  explicit WholeMoments(const ParamStore& params);
  Tensor m(int slot) const { return m_.get(slot); }
  Tensor v(int slot) const { return v_.get(slot); }
  Arena& m_arena() { return m_; }
  Arena& v_arena() { return v_; }

 private:
  Arena m_, v_;
};

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // zero1: nullptr for the plain optimizer (moments of every parameter); else ZeRO-1 over the shard
  // that `zero1` (kShardedMean, over params.grads_arena(), alive as long as this) gives this DP rank.
  AdamW(ParamStore& params, AdamWConfig cfg, DpGradSync* zero1 = nullptr);

  // One update of every parameter from its gradient in `params` times `grad_scale` (the clipping
  // factor, GradClip::scale; the gradients are read, not written), at learning rate `lr`: one fused
  // adamw_update over all of them (kernels/ops.h), which on the GPU also rewrites the bf16 copies.
  // The same bits as scale_tensors(grads, grad_scale) then step(ctx, lr).
  // ZeRO-1: the shard's parameters, from the shard's (reduced) gradients, then the all-gather of the
  // masters over DP (a collective) and the bf16 copies rewritten on ctx's stream.
  void step(Context& ctx, double lr, double grad_scale = 1.0);
  void step(double lr, double grad_scale = 1.0);  // CPU parameters

  int64_t steps_done() const { return t_; }
  void set_steps_done(int64_t t) { t_ = t; }  // when the moments come from a checkpoint
  // The moments of a parameter (plain optimizer only; ZeRO-1 holds parts: gather_moments).
  Tensor m(int slot) const;
  Tensor v(int slot) const;
  Arena& state() { return state_; }
  const AdamWConfig& config() const { return cfg_; }

  // ZeRO-1.
  bool sharded() const { return zero1_ != nullptr; }
  const DpGradSync* zero1() const { return zero1_; }
  // The shard, per parameter: elements [offset, offset + count) of slot `slot` are elements
  // [shard_offset, shard_offset + count) of the flat moments.
  struct ShardPiece {
    int slot;
    int64_t offset, count, shard_offset;
  };
  const std::vector<ShardPiece>& shard_pieces() const { return pieces_; }
  // The gradients of the shard's pieces (views); of TP-split parameters only, or replicated only.
  std::vector<Tensor> shard_grads(bool split_params) const;

  // The whole moments into `out`. ZeRO-1: a collective over DP (every DP rank calls it, all get
  // them); plain: a copy.
  void gather_moments(WholeMoments& out) const;
  // The moments from whole ones (a checkpoint): ZeRO-1 keeps this rank's shard; plain copies.
  void scatter_moments(const WholeMoments& in);

 private:
  ParamStore& params_;
  AdamWConfig cfg_;
  DpGradSync* zero1_ = nullptr;
  std::vector<ShardPiece> pieces_;
  Arena state_;
  int64_t t_ = 0;
};

// sqrt(sum of g^2 over every gradient), accumulated in double (fp32 partials on the GPU).
double grad_global_norm(Context& ctx, const ParamStore& params);
double grad_global_norm(const ParamStore& params);  // on the parameters' device, default stream

// Gradient clipping as a factor: the global norm before clipping, and what the gradients are to be
// multiplied by, max_norm / (norm + 1e-6) when max_norm > 0 and that is below 1, else exactly 1
// (a NaN norm too: it is left to the caller). Hand `scale` to AdamW::step.
struct GradClip {
  double norm = 0;
  double scale = 1;
};
// The factor of a norm (the one copy of the rule above).
GradClip grad_clip_of_norm(double norm, double max_norm);
GradClip grad_clip_factor(Context& ctx, const ParamStore& params, double max_norm);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1; max_norm <= 0 disables.
// Returns the norm before clipping. (grad_clip_factor, then scale_tensors when the factor is not 1.)
double clip_grad_norm(Context& ctx, ParamStore& params, double max_norm);
double clip_grad_norm(ParamStore& params, double max_norm);

// grad_clip_factor under ZeRO-1: only the shards hold the DP mean, so the norm is the sum of squares
// of this rank's shard summed over DP, and over TP for TP-split parameters (`tp`: this rank's TP
// communicator, nullptr at tp = 1; replicated parameters, the same on every TP rank, count once).
// The same norm and factor on every rank; the norm equals the plain one up to the order of the
// double sums.
GradClip grad_clip_factor_zero1(Context& ctx, const AdamW& opt, Communicator* tp, double max_norm);
// The same, with the shard's gradients scaled (only the shard: the rest of the arena is not the mean).
double clip_grad_norm_zero1(Context& ctx, const AdamW& opt, Communicator* tp, double max_norm);

}  // namespace dt
