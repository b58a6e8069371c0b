#include "trainer/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/device.h"
#include "kernels/ops.h"

namespace dt {

namespace {

// A 1-D view of `count` elements of t from element `offset`.
Tensor flat_part(const Tensor& t, int64_t offset, int64_t count) {
  return Tensor(static_cast<char*>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype)), t.dtype, t.device,
                {count});
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  device_copy(dst.data, dst.device, src.data, src.device, src.bytes());
}

}  // namespace

WholeMoments::WholeMoments(const ParamStore& params) : m_("moments.m", params.device()), v_("moments.v", params.device()) {
  // The gradients' entries in their order: the same offsets (core/arena.h), so DpGradSync's
  // buckets and shards apply to these arenas too.
  for (const ParamInfo& info : params.infos()) {
    m_.declare(info.name, params.dtype(), info.shape);
    v_.declare(info.name, params.dtype(), info.shape);
  }
  m_.allocate();
  v_.allocate();
}

AdamW::AdamW(ParamStore& params, AdamWConfig cfg, DpGradSync* zero1)
    : params_(params), cfg_(cfg), zero1_(zero1), state_("optimizer", params.device()) {
  if (!zero1_) {
    for (const ParamInfo& info : params.infos()) {
      state_.declare("m/" + info.name, params.dtype(), info.shape);
      state_.declare("v/" + info.name, params.dtype(), info.shape);
    }
    state_.allocate();  // zeroed: m = v = 0 before the first step
    return;
  }
  const Arena& grads = params.grads_arena();
  DT_CHECK(zero1_->mode() == DpGradMode::kShardedMean,
           "AdamW (ZeRO-1): the DP gradient sync must reduce-scatter this model's gradient arena "
           "(DpGradMode::kShardedMean)");
  // The shard's ranges cut across parameters: one piece per (range, parameter) overlap. The
  // alignment padding between slots belongs to no parameter and gets no update.
  const int64_t es = static_cast<int64_t>(dtype_size(params.dtype()));
  int64_t at = 0;  // position in the flat moments
  for (const auto& [offset, count] : zero1_->shard_ranges()) {
    for (int s = 0; s < params.size(); ++s) {
      const ArenaEntry& e = grads.entries()[s];
      const int64_t lo = static_cast<int64_t>(e.offset) / es, hi = lo + static_cast<int64_t>(e.bytes) / es;
      const int64_t a = std::max(lo, offset), b = std::min(hi, offset + count);
      if (a < b) pieces_.push_back({s, a - lo, b - a, at + (a - offset)});
    }
    at += count;
  }
  state_.declare("m", params.dtype(), {at});
  state_.declare("v", params.dtype(), {at});
  state_.allocate();
}

Tensor AdamW::m(int slot) const {
  DT_CHECK(!zero1_, "AdamW: under ZeRO-1 each rank holds part of the moments; gather_moments() gives them whole");
  return state_.get(2 * slot);
}

Tensor AdamW::v(int slot) const {
  DT_CHECK(!zero1_, "AdamW: under ZeRO-1 each rank holds part of the moments; gather_moments() gives them whole");
  return state_.get(2 * slot + 1);
}

void AdamW::step(double lr, double grad_scale) {
  Context ctx;
  step(ctx, lr, grad_scale);
}

void AdamW::step(Context& ctx, double lr, double grad_scale) {
  DT_CHECK(ctx.device == params_.device(), "AdamW: the context's device differs from the parameters'");
  ++t_;
  // The scalars in double, as PyTorch computes them in Python.
  double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t_));
  double bc2_sqrt = std::sqrt(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  double step_size = lr / bc1;
  auto decay_of = [&](int s) { return params_.infos()[s].decay ? 1.0 - lr * cfg_.weight_decay : 1.0; };
  std::vector<AdamWTensor> ts;
  if (!zero1_) {
    ts.reserve(params_.size());
    for (int s = 0; s < params_.size(); ++s)
      ts.push_back({params_.master(s), params_.grad(s), m(s), v(s), params_.compute_copy(s), decay_of(s)});
    adamw_update(ctx, ts, cfg_.beta1, cfg_.beta2, step_size, bc2_sqrt, cfg_.eps, grad_scale);
    return;
  }
  // ZeRO-1: this rank's pieces (no bf16 copies here: they are rewritten whole after the gather).
  const Tensor ms = state_.get(0), vs = state_.get(1);
  ts.reserve(pieces_.size());
  for (const ShardPiece& p : pieces_)
    ts.push_back({flat_part(params_.master(p.slot), p.offset, p.count), flat_part(params_.grad(p.slot), p.offset, p.count),
                  flat_part(ms, p.shard_offset, p.count), flat_part(vs, p.shard_offset, p.count), Tensor(),
                  decay_of(p.slot)});
  adamw_update(ctx, ts, cfg_.beta1, cfg_.beta2, step_size, bc2_sqrt, cfg_.eps, grad_scale);
  zero1_->all_gather_shards(params_.params_arena());  // every rank's updated chunks of the masters
  for (int s = 0; s < params_.size(); ++s)            // torch: p_bf16.copy_(p)
    if (const Tensor c = params_.compute_copy(s); c.defined()) cast(ctx, c, params_.master(s));
}

std::vector<Tensor> AdamW::shard_grads(bool split_params) const {
  std::vector<Tensor> out;
  for (const ShardPiece& p : pieces_)
    if ((params_.infos()[p.slot].split != TpSplit::kReplicated) == split_params)
      out.push_back(flat_part(params_.grad(p.slot), p.offset, p.count));
  return out;
}

void AdamW::gather_moments(WholeMoments& out) const {
  if (!zero1_) {
    for (int s = 0; s < params_.size(); ++s) {
      copy_tensor(out.m(s), m(s));
      copy_tensor(out.v(s), v(s));
    }
    return;
  }
  // This rank's pieces into their places (zeros elsewhere), then every rank's chunks gathered.
  out.m_arena().zero();
  out.v_arena().zero();
  const Tensor ms = state_.get(0), vs = state_.get(1);
  for (const ShardPiece& p : pieces_) {
    copy_tensor(flat_part(out.m(p.slot), p.offset, p.count), flat_part(ms, p.shard_offset, p.count));
    copy_tensor(flat_part(out.v(p.slot), p.offset, p.count), flat_part(vs, p.shard_offset, p.count));
  }
  zero1_->all_gather_shards(out.m_arena());
  zero1_->all_gather_shards(out.v_arena());
  zero1_->comm().synchronize();  // the host reads them next (checkpoint)
}

void AdamW::scatter_moments(const WholeMoments& in) {
  if (!zero1_) {
    for (int s = 0; s < params_.size(); ++s) {
      copy_tensor(m(s), in.m(s));
      copy_tensor(v(s), in.v(s));
    }
    return;
  }
  const Tensor ms = state_.get(0), vs = state_.get(1);
  for (const ShardPiece& p : pieces_) {
    copy_tensor(flat_part(ms, p.shard_offset, p.count), flat_part(in.m(p.slot), p.offset, p.count));
    copy_tensor(flat_part(vs, p.shard_offset, p.count), flat_part(in.v(p.slot), p.offset, p.count));
  }
}

namespace {

std::vector<Tensor> all_grads(const ParamStore& params) {
  std::vector<Tensor> gs;
  for (int i = 0; i < params.size(); ++i) gs.push_back(params.grad(i));
  return gs;
}

Context context_of(const ParamStore& params) {
  Context ctx;
  ctx.device = params.device();
  return ctx;
}

}  // namespace

double grad_global_norm(Context& ctx, const ParamStore& params) {
  return std::sqrt(sum_squares(ctx, all_grads(params)));
}

double grad_global_norm(const ParamStore& params) {
  Context ctx = context_of(params);
  return grad_global_norm(ctx, params);
}

GradClip grad_clip_of_norm(double norm, double max_norm) {
  if (!(max_norm > 0)) return {norm, 1.0};
  const double factor = max_norm / (norm + 1e-6);  // torch.nn.utils.clip_grad_norm_'s clip_coef
  return {norm, factor < 1.0 ? factor : 1.0};       // also 1 for a NaN norm: left to the caller
}

GradClip grad_clip_factor(Context& ctx, const ParamStore& params, double max_norm) {
  return grad_clip_of_norm(grad_global_norm(ctx, params), max_norm);
}

double clip_grad_norm(Context& ctx, ParamStore& params, double max_norm) {
  const GradClip clip = grad_clip_factor(ctx, params, max_norm);
  if (clip.scale != 1.0) scale_tensors(ctx, all_grads(params), clip.scale);
  return clip.norm;
}

double clip_grad_norm(ParamStore& params, double max_norm) {
  Context ctx = context_of(params);
  return clip_grad_norm(ctx, params, max_norm);
}

GradClip grad_clip_factor_zero1(Context& ctx, const AdamW& opt, Communicator* tp, double max_norm) {
  DT_CHECK(opt.sharded(), "grad_clip_factor_zero1: the optimizer is not sharded (parallel.zero1)");
  Communicator& dp = opt.zero1()->comm();
  std::vector<Tensor> split = opt.shard_grads(true), replicated = opt.shard_grads(false);
  auto squares = [&](const std::vector<Tensor>& xs) { return xs.empty() ? 0.0 : sum_squares(ctx, xs); };
  double ss;
  if (tp == nullptr || tp->size() == 1) {  // every parameter is whole here: one sum
    split.insert(split.end(), replicated.begin(), replicated.end());
    replicated.clear();
    ss = all_reduce_value(dp, squares(split), ReduceOp::kSum);
  } else {
    const double ss_split = all_reduce_value(dp, squares(split), ReduceOp::kSum);
    const double ss_repl = all_reduce_value(dp, squares(replicated), ReduceOp::kSum);
    ss = all_reduce_value(*tp, ss_split, ReduceOp::kSum) + ss_repl;
  }
  return grad_clip_of_norm(std::sqrt(ss), max_norm);
}

double clip_grad_norm_zero1(Context& ctx, const AdamW& opt, Communicator* tp, double max_norm) {
  const GradClip clip = grad_clip_factor_zero1(ctx, opt, tp, max_norm);
  if (clip.scale == 1.0) return clip.norm;
  std::vector<Tensor> shard = opt.shard_grads(true), replicated = opt.shard_grads(false);
  shard.insert(shard.end(), replicated.begin(), replicated.end());
  scale_tensors(ctx, shard, clip.scale);
  return clip.norm;
}

}  // namespace dt
