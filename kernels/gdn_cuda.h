// Host-side declarations of the Gated DeltaNet CUDA launchers (kernels/cuda/gdn_*.cu).
// Compiled by g++ and nvcc alike: plain structs of pointers, sizes and strides, no CUDA types
// (docs/architecture.md). kernels/ops_gdn.cpp checks the Tensors and fills these; the launchers
// check sizes again (they may be called directly by benchmarks) and every launch is
// followed by an error check. What each kernel does and which run for which sizes:
// docs/gdn_kernels.md.
//
// Dtypes on the GPU (docs/gdn_kernels.md, "Precision"): q, k, v, o, d_o, dq, dk, dv are bf16
// (passed as the raw uint16_t bits); the gates g, beta, their gradients and every state are fp32.
// Layout as on the CPU (kernels/ops.h, gdn section): row r = b*T + t of q starts at
// q + r*ld_q and holds Hk packed heads of dk features; v, o, d_o hold Hv heads of dv;
// g, beta are [B, T, Hv] contiguous; states are [B, Hv, dk, dv] contiguous.
#pragma once

#include <cstdint>

namespace dt {

// Which kernels run the chunked rule. kAuto: the tensor-core kernels (kernels/cuda/gdn_tc_*.cu)
// when chunk == 64 and dk = dv in {64, 128}, else the plain fp32 ones (kernels/cuda/gdn_chunk.cu:
// any chunk <= 64, any head dims that are multiples of 8 up to 128, dk != dv allowed), which stay
// as a second, simpler GPU reference. Everything else about the kernels (tiles, which kernels run
// beside which) follows from the sizes and the device: plan_gdn (kernels/cuda/gdn_plan.h).
enum class GdnCudaImpl : uint8_t { kAuto, kTensorCore, kSimt };

struct GdnCudaDims {
  int64_t B = 0, T = 0, Hk = 0, Hv = 0, dk = 0, dv = 0;
  int chunk = 64;  // 1..64 (64 in training; smaller ones help debugging)
  GdnCudaImpl impl = GdnCudaImpl::kAuto;
};

struct GdnCudaForwardParams {
  GdnCudaDims dims;
  const uint16_t* q = nullptr;  // bf16, l2-normalised and scaled by dk^-1/2
  const uint16_t* k = nullptr;  // bf16, l2-normalised
  const uint16_t* v = nullptr;  // bf16
  int64_t ld_q = 0, ld_k = 0, ld_v = 0;
  const float* g = nullptr;     // log decay, <= 0
  const float* beta = nullptr;
  const float* S0 = nullptr;    // null: zero initial state
  uint16_t* o = nullptr;        // bf16
  int64_t ld_o = 0;
  float* S_out = nullptr;       // null: final state not wanted
  // Optional, gdn_chunk_saved_bytes(dims) bytes of device memory (256-byte aligned) where the
  // forward leaves what its backward needs (the WY factors and the state entering each chunk; at
  // head dim 128 also M = lower(Q K^T o Gam) for the reverse state pass),
  // so that gdn_chunk_backward_cuda can skip recomputing them. null: a temporary workspace.
  void* saved = nullptr;
  // Optional, all four or none: the l2norms of q and k taken here too. q and k are then their
  // inputs x; q_hat, k_hat receive y = scale x r (bf16, [B*T] rows ld_hat apart) and q_rnorm,
  // k_rnorm r = 1 / sqrt(sum x^2 + 1e-6) ([B*T, Hk] fp32), as gdn_l2norm_forward_cuda writes them,
  // for the backward (GdnCudaBackwardParams::q_rnorm). The tensor-core kernels normalise the tiles
  // they load (Hv == Hk); elsewhere the l2norms run first.
  uint16_t* q_hat = nullptr;
  uint16_t* k_hat = nullptr;
  int64_t ld_hat = 0;
  float* q_rnorm = nullptr;
  float* k_rnorm = nullptr;
  float q_scale = 1.f, k_scale = 1.f;
  // Optional: the memory pool (a cudaMemPool_t: the context's, cuda_scratch_pool in
  // kernels/cuda_context.h) of the fp32 SIMT kernels' stream-ordered workspace; null: the device's
  // current pool (kernels/cuda/common.cuh's scratch_malloc). The tensor-core kernels' workspace
  // comes from their own pool (gdn_chunk_forward_cuda below).
  void* pool = nullptr;
};

struct GdnCudaBackwardParams {
  GdnCudaDims dims;
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t ld_q = 0, ld_k = 0, ld_v = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
  const float* S0 = nullptr;      // null: zero
  const uint16_t* d_o = nullptr;  // bf16
  int64_t ld_do = 0;
  const float* dS_out = nullptr;  // null: zero
  uint16_t* dq = nullptr;         // bf16, summed over the value heads of each key head
  uint16_t* dk = nullptr;
  uint16_t* dv = nullptr;
  int64_t ld_dq = 0, ld_dk = 0, ld_dv = 0;
  float* dg = nullptr;
  float* dbeta = nullptr;
  float* dS0 = nullptr;           // null: not wanted
  // The forward's `saved` buffer from a call with the same dims and inputs (q, k, v, g, beta,
  // S0), untouched since; null: the backward recomputes it.
  const void* saved = nullptr;
  // Optional, both or neither: the l2norm's backward taken here too. q and k are then the outputs
  // of gdn_l2norm_forward_cuda (q = q_scale x r, k likewise), q_rnorm and k_rnorm its r ([B*T, Hk]
  // fp32), and dq, dk come out as the gradients with respect to x. The tensor-core kernels apply
  // it as they store dq and dk (Hv == Hk); elsewhere the l2norm's backward runs after, in place.
  const float* q_rnorm = nullptr;
  const float* k_rnorm = nullptr;
  float q_scale = 1.f, k_scale = 1.f;
  void* pool = nullptr;  // as GdnCudaForwardParams::pool
};

// The chunked gated delta rule (docs/model.md; the kernels: docs/gdn_kernels.md). Stream-ordered
// on `stream` (a cudaStream_t; null = the legacy default stream). The workspace comes from a
// stream-ordered allocation on the same stream, from a memory pool of these kernels' own that keeps
// freed blocks cached (after the first call of a size no cudaMalloc happens; the device's default
// pool is not touched), and is freed before return (stream-ordered). Deterministic: no atomics, every sum is taken in a fixed
// order, so the same inputs give the same bits.
void gdn_chunk_forward_cuda(const GdnCudaForwardParams& p, void* stream);
void gdn_chunk_backward_cuda(const GdnCudaBackwardParams& p, void* stream);

// Bytes of device workspace the calls above allocate (for benchmarks and memory planning), and
// of the forward's `saved` buffer (0 where the kernels for these dims keep nothing: the SIMT
// ones; the buffer is then ignored). With `saved` given, the forward allocates nothing and the
// backward gdn_chunk_backward_workspace_bytes(d, true).
int64_t gdn_chunk_forward_workspace_bytes(const GdnCudaDims& d);
int64_t gdn_chunk_backward_workspace_bytes(const GdnCudaDims& d, bool with_saved = false);
int64_t gdn_chunk_saved_bytes(const GdnCudaDims& d);

// The per-CTA timeline of the tensor-core kernels (a measuring tool: bench_gdn --timeline,
// tools/dev/gdn_timeline.py; docs/gdn_kernels.md, "Measuring"). Only in a build configured with
// -DDELTATRON_GDN_TIMELINE=ON (gdn_cuda_timeline_built); elsewhere setting stamps throws. While set,
// thread 0 of each CTA of the calls launched (or captured) after it writes one stamp as it leaves:
// its kernel (gdn_cuda_timeline_kernel names it), its SM, its start and end times (the GPU's
// globaltimer, ns) and the SM's clock64 at both. stamps: device memory for cap of them; n: a device
// counter of the slots taken, zeroed by the caller (CTAs past cap write nothing). stamps null: off.
struct GdnCudaStamp {
  uint32_t kernel = 0, sm = 0;
  uint64_t t0 = 0, t1 = 0;
  uint64_t c0 = 0, c1 = 0;
};
bool gdn_cuda_timeline_built();
void gdn_cuda_timeline(GdnCudaStamp* stamps, unsigned* n, unsigned cap);
const char* gdn_cuda_timeline_kernel(uint32_t kernel);

}  // namespace dt

namespace dt {

// Per-head L2 norm (kernels/cpu/gdn_l2norm.h): y = scale * x / sqrt(sum_d x^2 + 1e-6), bf16 in and
// out, fp32 math, a group of lanes per (row, head); rows strided (x may be a slice of the conv
// output). d a multiple of 8 up to 128 (16-byte accesses when every row is 16-byte aligned).
struct GdnCudaL2NormParams {
  int64_t rows = 0, H = 0, d = 0;
  float scale = 1.f;
  const uint16_t* x = nullptr;
  int64_t ld_x = 0;
  const uint16_t* dy = nullptr;  // backward only
  int64_t ld_dy = 0;
  uint16_t* y = nullptr;         // forward: y; backward: dx
  int64_t ld_y = 0;
  // Optional, [rows, H] fp32: r = 1 / sqrt(sum_d x^2 + 1e-6) per (row, head). The forward writes
  // it when given; the backward, when given, takes x to be the forward's output y (= scale x r)
  // and reads r here instead of computing it: dx = scale r (dy - x^ (x^ . dy)), x^ = y / scale.
  // The chunk's backward uses this form (GdnCudaBackwardParams::q_rnorm).
  float* rnorm = nullptr;
};
void gdn_l2norm_forward_cuda(const GdnCudaL2NormParams& p, void* stream);
void gdn_l2norm_backward_cuda(const GdnCudaL2NormParams& p, void* stream);  // writes dx into p.y

// Gates (kernels/cpu/gdn_gates.h), all fp32, [rows, H] contiguous; A_log, dt_bias [H]:
//   g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b).
// Backward writes da, db and ACCUMULATES dA_log, ddt_bias (a fixed-order sum over rows per head:
// one CTA per head, no atomics).
struct GdnCudaGatesParams {
  int64_t rows = 0, H = 0;
  const float *a = nullptr, *b = nullptr, *A_log = nullptr, *dt_bias = nullptr;
  float *g = nullptr, *beta = nullptr;                            // forward outputs
  const float *dg = nullptr, *dbeta = nullptr;                    // backward inputs
  float *da = nullptr, *db = nullptr, *dA_log = nullptr, *ddt_bias = nullptr;  // backward outputs
  // Optional: the memory pool (a cudaMemPool_t: the context's, cuda_scratch_pool in
  // kernels/cuda_context.h) of the launcher's stream-ordered scratch; null: the device's current
  // pool (kernels/cuda/common.cuh's scratch_malloc).
  void* pool = nullptr;
};
void gdn_gates_forward_cuda(const GdnCudaGatesParams& p, void* stream);
void gdn_gates_backward_cuda(const GdnCudaGatesParams& p, void* stream);

}  // namespace dt

namespace dt {

// The recurrent form, token by token (kernels/cpu/gdn_delta_rule.h), for decoding (T = 1 with the
// cache state in S0 / S_out, which may alias: each CTA reads its part of S0 before writing S_out)
// and as a second GPU reference. Same parameters and layout as the chunked forward; chunk unused.
//   S_t = e^{g_t} S_{t-1} + beta_t k_t (v_t - e^{g_t} S_{t-1}^T k_t)^T,   o_t = S_t^T q_t
void gdn_recurrent_forward_cuda(const GdnCudaForwardParams& p, void* stream);

}  // namespace dt

namespace dt {

// Causal depthwise conv1d + SiLU (kernels/cpu/gdn_conv.h): x, y, dy, dx bf16 [B, T, C] contiguous;
// w fp32 [C, K] (conv1d.weight [C, 1, K]); dw fp32, ACCUMULATED in a fixed order (no atomics).
//   y[b,t,c] = silu(sum_{i<K} w[c,i] x[b, t-K+1+i, c])
struct GdnCudaConvParams {
  int64_t B = 0, T = 0, C = 0, K = 0;
  const uint16_t* x = nullptr;
  const float* w = nullptr;
  uint16_t* y = nullptr;          // forward
  const uint16_t* dy = nullptr;   // backward
  uint16_t* dx = nullptr;
  float* dw = nullptr;
  void* pool = nullptr;  // as GdnCudaGatesParams::pool
};
void gdn_conv_forward_cuda(const GdnCudaConvParams& p, void* stream);
void gdn_conv_backward_cuda(const GdnCudaConvParams& p, void* stream);

}  // namespace dt

namespace dt {

// Gated RMSNorm of the GDN output per value head (kernels/cpu/gdn_norm.h):
//   y = o / sqrt(mean_d(o^2) + eps) * w * silu(z)
// o, z, y, dy, d_o, dz: bf16 [rows, H, d] contiguous; w fp32 [d]; dw fp32 [d], ACCUMULATED by a
// two-pass fixed-order reduction (no atomics). d a multiple of 8 up to 256.
struct GdnCudaNormParams {
  int64_t rows = 0, H = 0, d = 0;
  float eps = 1e-6f;
  const uint16_t* o = nullptr;
  const uint16_t* z = nullptr;
  const float* w = nullptr;
  uint16_t* y = nullptr;          // forward
  const uint16_t* dy = nullptr;   // backward
  uint16_t* d_o = nullptr;
  uint16_t* dz = nullptr;
  float* dw = nullptr;
  void* pool = nullptr;  // as GdnCudaGatesParams::pool
};
void gdn_norm_forward_cuda(const GdnCudaNormParams& p, void* stream);
void gdn_norm_backward_cuda(const GdnCudaNormParams& p, void* stream);

}  // namespace dt
