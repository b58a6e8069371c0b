// The public entry points of the chunked gated delta rule on the GPU (kernels/gdn_cuda.h): the
// checks, the kernels plan_gdn (gdn_plan.h) picks, launched in its order, and the workspace: one
// stream-ordered allocation from the tensor-core kernels' own memory pool, which keeps freed blocks
// cached (after the first call of a size no allocation reaches the driver).
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/cuda/gdn_plan.h"
#include "kernels/cuda/gdn_tc.cuh"

namespace dt::cuda {

namespace {

template <class P>
void take(P*& p, int64_t bytes, char* base, int64_t& off) {
  p = base ? reinterpret_cast<P*>(base + off) : nullptr;
  off += (bytes + 255) / 256 * 256;
}

// The saved part of the workspace: what the forward computes and the backward reads (G, W, U, the
// entering states, V' and T). With base == null only counts the bytes.
int64_t tc_saved_layout(TcArgs& a, const GdnCudaDims& d, char* base) {
  const int64_t D = d.dk, nch = d.B * d.Hv * ((d.T + kC - 1) / kC), rows = nch * kC;
  int64_t off = 0;
  take(a.G, rows * 4, base, off);
  take(a.W, rows * D * 2, base, off);
  take(a.U, rows * D * 2, base, off);
  take(a.S, nch * D * D * 2, base, off);
  take(a.Vn, rows * D * 2, base, off);
  take(a.Tb, rows * kC * 2, base, off);
  if (d.dk == 128) take(a.Mb, rows * kC * 2, base, off);  // for dvl_fused (head dim 128 only)
  take(a.ready, nch * 4, base, off);
  take(a.fed, nch * 4, base, off);  // prep beside the forward state pass
  return off;
}

// The backward's own workspace (after the saved part, or alone when the forward's is given); without
// dvl and dOg where the reverse pass makes them (a.dvl_fused, as tc_inputs decided it).
int64_t tc_backward_layout(TcArgs& a, const GdnCudaDims& d, char* base) {
  const int64_t D = d.dk, nch = d.B * d.Hv * ((d.T + kC - 1) / kC), rows = nch * kC;
  int64_t off = 0;
  if (!a.dvl_fused) {  // else the reverse state pass makes them in shared memory
    take(a.dvl, rows * D * 2, base, off);
    take(a.dOg, rows * D * 2, base, off);
  }
  take(a.dS, nch * D * D * 2, base, off);
  take(a.dVn, rows * D * 2, base, off);
  take(a.dW, rows * D * 2, base, off);
  take(a.dk_part, rows * D * 2, base, off);
  take(a.dG_part, rows * 4, base, off);
  take(a.ready, nch * 4, base, off);  // grad_qk chasing the reverse state pass
  take(a.qk_ticket, 4, base, off);
  if (d.Hv > d.Hk) {
    take(a.dq_vh, d.B * d.T * d.Hv * D * 4, base, off);
    take(a.dk_vh, d.B * d.T * d.Hv * D * 4, base, off);
  }
  return off;
}

bool aligned(const void* p, int64_t ld, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0 && (ld * 2) % bytes == 0;
}

TcTimeline g_timeline;  // gdn_cuda_timeline

// The tensor-core kernels' arguments: the sizes, the plan's choices and the inputs.
TcArgs tc_inputs(const GdnCudaDims& d, const GdnPlan& plan, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                 int64_t ld_q, int64_t ld_k, int64_t ld_v, const float* g, const float* beta, const float* S0) {
  TcArgs a;
  a.tl = g_timeline;
  a.B = d.B, a.T = d.T, a.Hk = d.Hk, a.Hv = d.Hv, a.NC = (d.T + kC - 1) / kC;
  a.sms = plan.sms;
  a.state_cols = plan.state_cols, a.state_stages = plan.state_stages;
  a.colwarp = plan.colwarp;
  a.dvl_fused = plan.dvl_fused;
  a.q = q, a.k = k, a.v = v, a.ld_q = ld_q, a.ld_k = ld_k, a.ld_v = ld_v;
  a.g = g, a.beta = beta, a.S0 = S0;
  a.vec_in = aligned(q, ld_q, 16) && aligned(k, ld_k, 16) && aligned(v, ld_v, 16);
  return a;
}

// The tensor-core workspace's own memory pool on the current device, made on its first use, with
// the largest release threshold: freed blocks stay cached in it, so after the first call of a size
// no allocation reaches the driver. The device's default pool, which other code shares, is left as
// it is.
cudaMemPool_t workspace_pool(const char* op) {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;  // by device
  int dev = 0;
  DT_CUDA_OK(cudaGetDevice(&dev), op);
  std::lock_guard<std::mutex> lock(mutex);
  if (pools.size() <= static_cast<size_t>(dev)) pools.resize(static_cast<size_t>(dev) + 1, nullptr);
  if (!pools[dev]) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    DT_CUDA_OK(cudaMemPoolCreate(&pool, &props), op);
    uint64_t keep = UINT64_MAX;
    DT_CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), op);
    pools[dev] = pool;
  }
  return pools[dev];
}

// One stream-ordered allocation of `bytes` from the workspace pool. Under stream capture it becomes
// the graph's own memory node (cudaMallocAsync), and no pool is made or touched while capturing.
char* tc_alloc(int64_t bytes, cudaStream_t s, const char* op) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DT_CUDA_OK(cudaStreamIsCapturing(s, &capture), op);
  void* base = nullptr;
  if (capture != cudaStreamCaptureStatusNone)
    DT_CUDA_OK(cudaMallocAsync(&base, static_cast<size_t>(bytes), s), op);
  else
    DT_CUDA_OK(cudaMallocFromPoolAsync(&base, static_cast<size_t>(bytes), workspace_pool(op), s), op);
  return static_cast<char*>(base);
}

// The per-chunk counts a chasing kernel waits on (TcArgs::ready, counting CTAs of `per_head` a
// head), zeroed on the stream.
void start_counts(TcArgs& a, int* counts, int per_head, cudaStream_t s, const char* op) {
  a.ready = counts, a.ready_count = per_head;
  DT_CUDA_OK(cudaMemsetAsync(counts, 0, static_cast<size_t>(a.B * a.Hv * a.NC) * 4, s), op);
}

void check_saved(const void* saved, const char* op) {
  DT_CHECK(reinterpret_cast<uintptr_t>(saved) % 256 == 0, "{}: the saved buffer must be 256-byte aligned", op);
}

// The l2norm's backward after the chunk's, in place on dq and dk (GdnCudaBackwardParams::q_rnorm),
// where the tensor-core kernels do not take it as they store them.
void l2norm_backward_after(const GdnCudaBackwardParams& p, cudaStream_t s) {
  const GdnCudaDims& d = p.dims;
  GdnCudaL2NormParams n;
  n.rows = d.B * d.T, n.H = d.Hk, n.d = d.dk;
  n.scale = p.q_scale, n.x = p.q, n.ld_x = p.ld_q, n.dy = p.dq, n.ld_dy = p.ld_dq, n.y = p.dq, n.ld_y = p.ld_dq;
  n.rnorm = const_cast<float*>(p.q_rnorm);
  gdn_l2norm_backward_cuda(n, s);
  n.scale = p.k_scale, n.x = p.k, n.ld_x = p.ld_k, n.dy = p.dk, n.ld_dy = p.ld_dk, n.y = p.dk, n.ld_y = p.ld_dk;
  n.rnorm = const_cast<float*>(p.k_rnorm);
  gdn_l2norm_backward_cuda(n, s);
}

// The l2norms before the chunk's forward (GdnCudaForwardParams::q_hat), where the tensor-core
// kernels do not take them on load; returns the forward's parameters on their outputs.
GdnCudaForwardParams l2norms_first(const GdnCudaForwardParams& p, cudaStream_t s) {
  const GdnCudaDims& d = p.dims;
  GdnCudaL2NormParams n;
  n.rows = d.B * d.T, n.H = d.Hk, n.d = d.dk, n.ld_y = p.ld_hat;
  n.scale = p.q_scale, n.x = p.q, n.ld_x = p.ld_q, n.y = p.q_hat, n.rnorm = p.q_rnorm;
  gdn_l2norm_forward_cuda(n, s);
  n.scale = p.k_scale, n.x = p.k, n.ld_x = p.ld_k, n.y = p.k_hat, n.rnorm = p.k_rnorm;
  gdn_l2norm_forward_cuda(n, s);
  GdnCudaForwardParams c = p;
  c.q = p.q_hat, c.k = p.k_hat, c.ld_q = c.ld_k = p.ld_hat;
  c.q_hat = c.k_hat = nullptr, c.q_rnorm = c.k_rnorm = nullptr;
  return c;
}

void check_l2norm_params(const GdnCudaForwardParams& p, const char* op) {
  const int set = !!p.q_hat + !!p.k_hat + !!p.q_rnorm + !!p.k_rnorm;
  DT_CHECK(set == 0 || set == 4, "{}: q_hat, k_hat, q_rnorm and k_rnorm come together (the l2norms taken here), "
           "got {} of the 4", op, set);
  if (set == 0) return;
  DT_CHECK(p.ld_hat >= p.dims.Hk * p.dims.dk, "{}: ld_hat {} is smaller than a row of q_hat ({})", op, p.ld_hat,
           p.dims.Hk * p.dims.dk);
  DT_CHECK(p.q_scale > 0.f && p.k_scale > 0.f, "{}: q_scale and k_scale must be > 0, got {} and {}", op, p.q_scale,
           p.k_scale);
}

}  // namespace

}  // namespace dt::cuda

namespace dt {

using namespace cuda;

GdnDevice gdn_current_device() {
  GdnDevice device;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return device;
  cudaDeviceGetAttribute(&device.sms, cudaDevAttrMultiProcessorCount, dev);
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
    device.dependent_launch = major >= 9;
  return device;
}

int64_t gdn_chunk_forward_workspace_bytes(const GdnCudaDims& d) {
  if (!plan_gdn(d, gdn_current_device()).tensor_cores) return chunk_workspace_bytes_simt(d, false);
  TcArgs a;
  return tc_saved_layout(a, d, nullptr);
}

int64_t gdn_chunk_backward_workspace_bytes(const GdnCudaDims& d, const GdnPlan& plan, bool with_saved) {
  if (!plan.tensor_cores) return chunk_workspace_bytes_simt(d, true);
  TcArgs a = tc_inputs(d, plan, nullptr, nullptr, nullptr, 0, 0, 0, nullptr, nullptr, nullptr);
  return (with_saved ? 0 : tc_saved_layout(a, d, nullptr)) + tc_backward_layout(a, d, nullptr);
}

int64_t gdn_chunk_backward_workspace_bytes(const GdnCudaDims& d, bool with_saved) {
  return gdn_chunk_backward_workspace_bytes(d, plan_gdn(d, gdn_current_device()), with_saved);
}

int64_t gdn_chunk_saved_bytes(const GdnCudaDims& d) {
  if (!plan_gdn(d, gdn_current_device()).tensor_cores) return 0;
  TcArgs a;
  return tc_saved_layout(a, d, nullptr);
}

void gdn_chunk_forward_cuda(const GdnCudaForwardParams& p, void* stream) {
  gdn_chunk_forward_cuda(p, plan_gdn(p.dims, gdn_current_device()), stream);
}

void gdn_chunk_backward_cuda(const GdnCudaBackwardParams& p, void* stream) {
  gdn_chunk_backward_cuda(p, plan_gdn(p.dims, gdn_current_device()), stream);
}

// Forward: prep (G, W, U), the state pass (S and V' per chunk, S_out), the output kernel (o), all
// in the saved buffer when given, else in a temporary one.
void gdn_chunk_forward_cuda(const GdnCudaForwardParams& p, const GdnPlan& plan, void* stream) {
  const char* op = "gdn_chunk_forward_cuda";
  auto s = static_cast<cudaStream_t>(stream);
  check_l2norm_params(p, op);
  const bool tc = plan.tensor_cores;
  if (p.q_hat && (!tc || p.dims.Hv != p.dims.Hk)) {
    const GdnCudaForwardParams c = l2norms_first(p, s);
    return tc ? gdn_chunk_forward_cuda(c, plan, stream) : chunk_forward_simt(c, s);
  }
  if (!tc) return chunk_forward_simt(p, s);
  check_forward_params(p, op);
  const GdnCudaDims& d = p.dims;
  TcArgs a = tc_inputs(d, plan, p.q, p.k, p.v, p.ld_q, p.ld_k, p.ld_v, p.g, p.beta, p.S0);
  if (p.q_hat) {  // taken on load: prep normalises K, the output kernel Q
    a.q_hat = p.q_hat, a.k_hat = p.k_hat, a.ld_hat = p.ld_hat, a.q_r = p.q_rnorm, a.k_r = p.k_rnorm;
    a.q_scale = p.q_scale, a.k_scale = p.k_scale;
    a.vec_hat = aligned(p.q_hat, p.ld_hat, 16) && aligned(p.k_hat, p.ld_hat, 16);
  }
  a.o = p.o, a.ld_o = p.ld_o, a.S_out = p.S_out;
  a.vec_out = aligned(p.o, p.ld_o, 4);
  a.vec16_o = aligned(p.o, p.ld_o, 16);
  char* temp = nullptr;
  if (p.saved) {
    check_saved(p.saved, op);
    tc_saved_layout(a, d, static_cast<char*>(p.saved));
  } else {
    temp = tc_alloc(tc_saved_layout(a, d, nullptr), s, op);
    tc_saved_layout(a, d, temp);
  }
  const int D = static_cast<int>(d.dk);
  TcArgs ap = a;  // prep's: the caller's K, which it normalises when asked
  ap.fed = nullptr;
  if (a.k_hat) {  // the state pass and the output kernel read the normalised K
    a.vec_in = a.vec_in && aligned(a.k_hat, a.ld_hat, 16);
    a.k = a.k_hat, a.ld_k = a.ld_hat, a.k_hat = nullptr;
  }
  // The output kernel chasing the state pass: per chunk, a count of the state pass's CTAs of the
  // head that have written its S and V', zeroed first.
  int* ready = a.ready;
  a.ready = nullptr;
  if (plan.chase_output) start_counts(a, ready, D / plan.fwd_cols, s, op);
  if (plan.prep_beside) {
    // The state pass first, then prep and the output kernel, each by programmatic dependent launch
    // (starting once every CTA of the kernel before it runs); their code loaded before: loaded on
    // its first launch, prep would wait for the state pass, which waits for it).
    ap.fed = a.fed, ap.ready = a.ready;
    DT_CUDA_OK(cudaMemsetAsync(a.fed, 0, static_cast<size_t>(a.B * a.Hv * a.NC) * 4, s), op);
    tc_prep_fed_load(a, D, op);
    tc_state_forward(a, D, s, op);
    tc_prep_fed(ap, D, s, op);
    tc_output(a, D, s, op);
  } else {
    a.fed = nullptr;
    tc_prep(ap, D, s, op);
    tc_state_forward(a, D, s, op);
    tc_output(a, D, s, op);
  }
  if (temp) DT_CUDA_OK(cudaFreeAsync(temp, s), op);
}

void gdn_chunk_backward_cuda(const GdnCudaBackwardParams& p, const GdnPlan& plan, void* stream) {
  const char* op = "gdn_chunk_backward_cuda";
  auto s = static_cast<cudaStream_t>(stream);
  if (!plan.tensor_cores) {
    chunk_backward_simt(p, s);
    if (p.q_rnorm) l2norm_backward_after(p, s);
    return;
  }
  check_backward_params(p, op);
  const GdnCudaDims& d = p.dims;
  TcArgs a = tc_inputs(d, plan, p.q, p.k, p.v, p.ld_q, p.ld_k, p.ld_v, p.g, p.beta, p.S0);
  a.d_o = p.d_o, a.ld_do = p.ld_do, a.dS_out = p.dS_out;
  a.vec_in = a.vec_in && aligned(p.d_o, p.ld_do, 16);
  a.dq = p.dq, a.dk = p.dk, a.dv = p.dv, a.ld_dq = p.ld_dq, a.ld_dk = p.ld_dk, a.ld_dv = p.ld_dv;
  a.vec_out = aligned(p.dq, p.ld_dq, 4) && aligned(p.dk, p.ld_dk, 4) && aligned(p.dv, p.ld_dv, 4);
  a.vec16_dq = aligned(p.dq, p.ld_dq, 16), a.vec16_dk = aligned(p.dk, p.ld_dk, 16);
  a.vec16_dv = aligned(p.dv, p.ld_dv, 16);
  a.dg = p.dg, a.dbeta = p.dbeta, a.dS0 = p.dS0;
  const bool norm_in_kernel = p.q_rnorm && d.Hv == d.Hk;  // else dq, dk are sums over value heads first
  if (norm_in_kernel) a.q_rnorm = p.q_rnorm, a.k_rnorm = p.k_rnorm, a.q_scale = p.q_scale, a.k_scale = p.k_scale;
  const int D = static_cast<int>(d.dk);
  if (p.saved) check_saved(p.saved, op);
  a.qk_persist = plan.qk_persist;
  // [saved part, unless given][backward part]
  const int64_t saved_bytes = p.saved ? 0 : tc_saved_layout(a, d, nullptr);
  char* temp = tc_alloc(saved_bytes + tc_backward_layout(a, d, nullptr), s, op);
  if (p.saved) tc_saved_layout(a, d, static_cast<char*>(const_cast<void*>(p.saved)));
  else tc_saved_layout(a, d, temp);
  tc_backward_layout(a, d, temp + saved_bytes);
  int* ready = a.ready;
  a.ready = nullptr, a.fed = nullptr;  // no kernel chases or feeds the state pass rerun here
  if (!p.saved) {  // the forward's G, W, U, S and V' again (and M: the output kernel without o)
    tc_prep(a, D, s, op);
    tc_state_forward(a, D, s, op);
    if (a.dvl_fused) {
      TcArgs m = a;
      m.o = nullptr;
      tc_output(m, D, s, op);
    }
  }
  if (!a.dvl_fused) tc_dv_local(a, D, s, op);  // else the reverse state pass does its work
  if (plan.chase_grad_qk) {
    // grad_qk chasing the reverse state pass: per chunk, a count of the state pass's CTAs of the
    // head that have written its dS' and dV', zeroed first
    start_counts(a, ready, D / plan.bwd_cols, s, op);
    // its ticket, zeroed before the state pass (a memset between the pass and grad_qk would wait for
    // the whole pass, and grad_qk would not chase it)
    if (a.qk_persist) DT_CUDA_OK(cudaMemsetAsync(a.qk_ticket, 0, 4, s), op);
  }
  tc_state_backward(a, D, s, op);
  tc_grad_qk(a, D, s, op);
  a.ready = nullptr;
  tc_grad_wy(a, D, s, op);
  if (d.Hv > d.Hk) {
    sum_value_heads(a.dq_vh, a.dq, a.ld_dq, a.B * a.T, a.Hk, a.Hv, D, s, op);
    sum_value_heads(a.dk_vh, a.dk, a.ld_dk, a.B * a.T, a.Hk, a.Hv, D, s, op);
  }
  DT_CUDA_OK(cudaFreeAsync(temp, s), op);
  if (p.q_rnorm && !norm_in_kernel) l2norm_backward_after(p, s);
}

bool gdn_cuda_timeline_built() {
#ifdef DT_GDN_TIMELINE
  return true;
#else
  return false;
#endif
}

void gdn_cuda_timeline(GdnCudaStamp* stamps, unsigned* n, unsigned cap) {
  DT_CHECK(!stamps || gdn_cuda_timeline_built(),
           "gdn_cuda_timeline: this build has no timeline; configure with -DDELTATRON_GDN_TIMELINE=ON");
  DT_CHECK(!stamps || (n && cap > 0), "gdn_cuda_timeline: stamps need a counter and a capacity");
  g_timeline = {stamps, n, cap};
}

const char* gdn_cuda_timeline_kernel(uint32_t kernel) {
  static const char* const names[] = {"prep",      "prep_fed", "state_fwd", "output",      "dv_local",
                                      "state_bwd", "grad_qk",  "grad_wy",   "state_fwd_cw"};
  static_assert(sizeof(names) / sizeof(names[0]) == cuda::kTlStateForwardCw + 1, "a name for each kernel");
  return kernel < sizeof(names) / sizeof(names[0]) ? names[kernel] : "?";
}

}  // namespace dt
