// plan_gdn: the kernel choices of the chunked gated delta rule on the GPU (kernels/cuda/gdn_plan.h;
// the reasons: docs/gdn_kernels.md, "The plan").
#include "kernels/cuda/gdn_plan.h"

#include "core/error.h"

namespace dt {

namespace {

constexpr int kChunk = 64;  // the tensor-core kernels' chunk

// The tensor-core kernels are built for dk = dv in {64, 128} and chunk 64 (their speed matters
// there); every other case (small or unequal head dims, other chunks) runs the fp32 SIMT kernels.
bool tensor_cores(const GdnCudaDims& d) {
  const bool dims = d.dk == d.dv && (d.dk == 64 || d.dk == 128);
  if (d.impl == GdnCudaImpl::kSimt) return false;
  if (d.impl == GdnCudaImpl::kTensorCore) {
    DT_CHECK(d.chunk == kChunk,
             "gdn_chunk: the tensor-core kernels take chunk {}, got {} (use GdnCudaImpl::kSimt for others)", kChunk,
             d.chunk);
    DT_CHECK(dims,
             "gdn_chunk: the tensor-core kernels take dk = dv in {{64, 128}}, got dk = {}, dv = {} (use "
             "GdnCudaImpl::kSimt or kAuto for others)",
             d.dk, d.dv);
    return true;
  }
  return d.chunk == kChunk && dims;
}

// Whether a state pass of `cols` columns a CTA (D / cols CTAs a head) leaves at least half of the
// SMs to a kernel chasing it.
bool beside(const GdnCudaDims& d, int sms, int cols) { return 2 * d.B * d.Hv * (d.dk / cols) <= sms; }

}  // namespace

GdnPlan plan_gdn(const GdnCudaDims& d, const GdnDevice& device) {
  GdnPlan p;
  p.tensor_cores = tensor_cores(d);
  if (!p.tensor_cores) return p;
  if (d.dk == 64) {
    // One 64-column CTA a head (faster than two of 32: the forward pass multiplies S and D o V' in
    // plain bf16), 2 stages (a third costs a CTA a SM); the output kernel and grad_qk chase the
    // state passes.
    p.state_cols = p.fwd_cols = p.bwd_cols = 64;
    p.state_stages = 2;
    p.chase_output = p.chase_grad_qk = true;
    return p;
  }
  // Head dim 128: 3 stages (one CTA a SM cannot hide the next chunk's loads behind another CTA's
  // work). The narrowest tiles whose CTAs (8 a head at 16 columns, 4 at 32, 2 at 64) leave at least
  // half of the SMs to the kernels chasing the state passes; with more heads 64 columns (one wave).
  p.sms = device.sms;
  p.state_stages = 3;
  const int64_t heads = d.B * d.Hv;
  p.state_cols = 16 * heads <= p.sms ? 16 : 8 * heads <= p.sms ? 32 : 64;
  p.fwd_cols = p.bwd_cols = p.state_cols;
  p.colwarp = p.state_cols == 64;  // the column-warp forward pass, faster there than the mma.sync one
  p.dvl_fused = true;     // it slows the reverse chain less than dv_local's kernel takes on every SM
  p.chase_output = true;  // beside the narrow tiles, and beside the column-warp pass
  p.prep_beside = p.state_cols <= 32 && device.dependent_launch;  // few heads beside a long chain: room for prep
  p.chase_grad_qk = beside(d, p.sms, p.state_cols);
  p.qk_persist = p.state_cols == 32;  // more chunks than the free SMs finish during the chain
  return p;
}

GdnPlan plan_gdn_for_testing(const GdnCudaDims& d, const GdnDevice& device, const GdnPlanForcing& f) {
  GdnPlan p = plan_gdn(d, device);
  if (!p.tensor_cores) return p;
  const int D = static_cast<int>(d.dk);
  DT_CHECK(f.overlap >= -1 && f.overlap <= 1, "gdn_chunk: overlap must be -1 (the default), 0 (off) or 1 (on), got {}",
           f.overlap);
  DT_CHECK(f.chase_prep >= -1 && f.chase_prep <= 1,
           "gdn_chunk: chase_prep must be -1 (by the sizes), 0 (off) or 1 (on), got {}", f.chase_prep);
  DT_CHECK(f.qk_persist >= -1 && f.qk_persist <= 1,
           "gdn_chunk: qk_persist must be -1 (by the sizes), 0 (off) or 1 (on), got {}", f.qk_persist);
  if (f.state_cols != 0) {
    DT_CHECK(D == 64 ? f.state_cols == 64 : (f.state_cols == 16 || f.state_cols == 32 || f.state_cols == 64),
             "gdn_chunk: state_cols {} is not available for head dim {} (64: 64; 128: 16, 32 or 64)", f.state_cols,
             D);
    p.state_cols = p.fwd_cols = p.bwd_cols = f.state_cols;
  }
  if (D == 64) {  // one kernel set: 64 columns, both chasers
    DT_CHECK(f.overlap != 0, "gdn_chunk: overlap 0 takes head dim 128 (at 64 the kernels always chase)");
    DT_CHECK(f.chase_prep != 1, "gdn_chunk: chase_prep 1 takes head dim 128, 16 or 32 columns a CTA");
    DT_CHECK(f.qk_persist != 1, "gdn_chunk: qk_persist 1 takes head dim 128 and grad_qk chasing the reverse state pass");
    return p;
  }
  // head dim 128: plan_gdn's choices for these columns, then the forced ones
  p.colwarp = p.state_cols == 64;
  p.chase_output = f.overlap != 0;
  p.chase_grad_qk = f.overlap == 1 || (f.overlap == -1 && beside(d, p.sms, p.bwd_cols));
  DT_CHECK(f.chase_prep != 1 || device.dependent_launch,
           "gdn_chunk: chase_prep 1 needs kernels of one stream running at the same time (programmatic dependent "
           "launch, compute capability 9.0 or later)");
  const bool fwd_beside = !p.colwarp && p.chase_output && beside(d, p.sms, p.fwd_cols);
  DT_CHECK(f.chase_prep != 1 || fwd_beside,
           "gdn_chunk: chase_prep 1 takes the mma.sync forward state pass (16 or 32 columns), chased by the output "
           "kernel (overlap -1 or 1), on at most half of the SMs; got {} columns, overlap {}, {} state-pass CTAs for "
           "{} SMs (set chase_prep to -1 or 0)",
           p.state_cols, f.overlap, d.B * d.Hv * (D / p.fwd_cols), p.sms);
  p.prep_beside = f.chase_prep == 1 || (f.chase_prep == -1 && fwd_beside && device.dependent_launch);
  DT_CHECK(f.qk_persist != 1 || p.chase_grad_qk,
           "gdn_chunk: qk_persist 1 takes head dim 128 and grad_qk chasing the reverse state pass (overlap -1 where "
           "the state pass leaves SMs free, or 1); got overlap {} (set qk_persist to -1 or 0)",
           f.overlap);
  p.qk_persist = p.chase_grad_qk && (f.qk_persist == 1 || (f.qk_persist == -1 && p.state_cols == 32));
  return p;
}

}  // namespace dt
