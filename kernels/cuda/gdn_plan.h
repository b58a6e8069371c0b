// Which kernels run the chunked gated delta rule on the GPU, and how they are launched: one
// function, plan_gdn, from the sizes and the device (docs/gdn_kernels.md, "The plan"). The
// launchers (kernels/cuda/gdn_tc_launch.cu) take its result and decide nothing themselves. Plain
// C++ (compiled by g++ and nvcc alike), no CUDA types.
#pragma once

#include <cstdint>

#include "kernels/gdn_cuda.h"

namespace dt {

// What the plan needs to know about the device.
struct GdnDevice {
  int sms = 132;  // streaming multiprocessors
  // Kernels of one stream may run at the same time by programmatic dependent launch (compute
  // capability 9.0 and later). Without it prep is not launched beside the forward state pass,
  // which would wait for it.
  bool dependent_launch = true;
};

struct GdnPlan {
  // The tensor-core kernels (kernels/cuda/gdn_tc_*.cu); false: the fp32 SIMT ones
  // (kernels/cuda/gdn_chunk.cu), and nothing below applies.
  bool tensor_cores = false;
  // The SM count the kernels assume (TcArgs::sms): the device's at head dim 128, where the tiles
  // and the chasing kernels go by it; 132 at head dim 64, where only the CTAs' row-block rotation
  // reads it.
  int sms = 132;
  int state_cols = 64;    // columns of S per CTA of the mma.sync state passes: 16, 32 or 64
  int state_stages = 2;   // chunks' tiles in flight in the mma.sync state passes: 2, or 3 at head dim 128
  bool colwarp = false;   // the forward state pass is the column-warp one (head dim 128, 64 columns a CTA)
  int fwd_cols = 64;      // columns per CTA of the forward state pass that runs (whichever kernel)
  int bwd_cols = 64;      // the same of the reverse state pass
  bool dvl_fused = false;     // dv_local's work inside the reverse state pass (head dim 128)
  bool chase_output = false;  // the forward's output kernel chases the forward state pass
  bool prep_beside = false;   // prep runs beside the forward state pass, launched after it
  bool chase_grad_qk = false; // grad_qk chases the reverse state pass
  bool qk_persist = false;    // grad_qk persistent (one CTA a SM, chunks by ticket)
};

// The plan for these sizes on this device. Throws where d.impl asks for the tensor-core kernels
// and the sizes have none.
GdnPlan plan_gdn(const GdnCudaDims& d, const GdnDevice& device);

// ---- for tests and benchmarks only: forcing a choice ----
// Each field left at its default keeps plan_gdn's choice, or the choice plan_gdn makes for the
// forced state_cols; a forced value is checked against the kernels that exist (a combination
// without a kernel throws, naming the field). The kernels are the ones plan_gdn takes for some
// sizes; nothing else is built. Training never forces anything.
struct GdnPlanForcing {
  int state_cols = 0;    // 0, or 64 (head dim 64); 16, 32, 64 (head dim 128; 64: the column-warp forward pass)
  int overlap = -1;      // -1, 0 (no kernel chases a state pass; head dim 128) or 1 (both chase)
  int chase_prep = -1;   // -1, 0 or 1 (GdnPlan::prep_beside)
  int qk_persist = -1;   // -1, 0 or 1
};
GdnPlan plan_gdn_for_testing(const GdnCudaDims& d, const GdnDevice& device, const GdnPlanForcing& force);

// The current device (kernels/cuda/gdn_tc_launch.cu), and the launchers and the workspace size
// with a given plan (the plain calls of kernels/gdn_cuda.h take plan_gdn's).
GdnDevice gdn_current_device();
void gdn_chunk_forward_cuda(const GdnCudaForwardParams& p, const GdnPlan& plan, void* stream);
void gdn_chunk_backward_cuda(const GdnCudaBackwardParams& p, const GdnPlan& plan, void* stream);
int64_t gdn_chunk_backward_workspace_bytes(const GdnCudaDims& d, const GdnPlan& plan, bool with_saved);

}  // namespace dt
