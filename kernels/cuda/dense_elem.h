// Host-side declarations of the dense elementwise CUDA launchers (kernels/cuda/embedding.cu,
// rmsnorm.cu, rope.cu, elementwise.cu, optim.cu). Compiled by g++ (C++20) and nvcc (C++17) alike:
// plain pointers, sizes and small structs, no CUDA types (docs/architecture.md). The Tensor-level
// functions of kernels/cuda_ops.h (kernels/cuda/dense_elem_ops.cpp, dense_optim_ops.cpp) check devices, dtypes
// and shapes and call these. Each launcher picks a vectorised kernel when the pointers and sizes
// allow it (16-byte bf16 accesses, 8 bytes for RoPE's and the dw reduction's) and a scalar one
// otherwise, launches on `stream` (a cudaStream_t; null = the legacy default stream) and checks
// the launch.
//
// bf16 tensors are passed as their raw uint16_t bits; fp32 as float.
#pragma once

#include <cstdint>

namespace dt::cuda {

// ---- embedding (embedding.cu) ----

// y[i, :] = w[ids[i], :]; a row whose id is outside [0, vocab) is written as NaN (the GPU cannot
// throw; the NaN reaches the loss, where the trainer's non-finite check stops the step).
void embedding_forward_launch(uint16_t* y, const int32_t* ids, const uint16_t* w, int64_t n, int64_t vocab,
                              int64_t dim, void* stream);
// dw[ids[i], :] += dy[i, :] in fp32, deterministically: a stable radix sort of (id, position), then
// one CTA column slice per run of equal ids summing its dy rows in position order, starting from
// the old dw row (the same order of additions as the CPU reference). Ids outside [0, vocab) are
// skipped. Scratch: `scratch` of at least embedding_backward_scratch_bytes(n, vocab) bytes, or
// null: allocated stream-ordered from `pool` (a cudaMemPool_t; null = the device's current pool;
// common.cuh's scratch_malloc) and freed (stream-ordered) before return.
int64_t embedding_backward_scratch_bytes(int64_t n, int64_t vocab);
void embedding_backward_launch(float* dw, const uint16_t* dy, const int32_t* ids, int64_t n, int64_t vocab,
                               int64_t dim, void* scratch, void* pool, void* stream);

// ---- RMSNorm (rmsnorm.cu) ----

struct RmsNormParams {
  int64_t rows = 0, dim = 0;
  float eps = 1e-6f;
  bool zero_centered = false;
  const uint16_t* x = nullptr;   // bf16 [rows, dim]
  const float* w = nullptr;      // fp32 [dim]
  uint16_t* y = nullptr;         // forward: bf16 [rows, dim] (may alias x)
  float* rstd = nullptr;         // forward: written; backward: read. fp32 [rows]
  const uint16_t* dy = nullptr;  // backward: bf16 [rows, dim]
  uint16_t* dx = nullptr;        // backward: bf16 [rows, dim] (may alias dy)
  float* dw = nullptr;           // backward: fp32 [dim], ACCUMULATED; null = not wanted
  // backward: bf16 [rows, dim] added to dx in fp32 before its one bf16 rounding (dx = residual +
  // the norm's dx); may alias dx or dy; null = none.
  const uint16_t* residual = nullptr;
};
void rmsnorm_forward_launch(const RmsNormParams& p, void* stream);
// dw: fixed per-(row chunk, column slice) partials, then one fixed-order sum per column. Scratch as
// embedding_backward_launch (0 bytes when dw is null).
int64_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t dim);
void rmsnorm_backward_launch(const RmsNormParams& p, void* scratch, void* pool, void* stream);

// ---- RoPE (rope.cu) ----

inline constexpr int64_t kRopeMaxRotaryDim = 512;

struct RopeParams {
  int64_t B = 0, T = 0, H = 0, D = 0, rotary_dim = 0;
  double theta = 10000.0;
  bool interleaved = false;
};
// y may alias x (forward); dx may alias dy (backward). bf16 [B, T, H, D].
void rope_forward_launch(uint16_t* y, const uint16_t* x, const RopeParams& p, void* stream);
void rope_backward_launch(uint16_t* dx, const uint16_t* dy, const RopeParams& p, void* stream);

// ---- elementwise (elementwise.cu); every output may alias an input ----

void swiglu_forward_launch(uint16_t* h, const uint16_t* gate, const uint16_t* up, int64_t n, void* stream);
void swiglu_backward_launch(uint16_t* dgate, uint16_t* dup, const uint16_t* dh, const uint16_t* gate,
                            const uint16_t* up, int64_t n, void* stream);
void sigmoid_gate_forward_launch(uint16_t* y, const uint16_t* x, const uint16_t* g, int64_t n, void* stream);
void sigmoid_gate_backward_launch(uint16_t* dx, uint16_t* dg, const uint16_t* dy, const uint16_t* x,
                                  const uint16_t* g, int64_t n, void* stream);
void residual_add_launch(uint16_t* y, const uint16_t* a, const uint16_t* b, int64_t n, void* stream);
// y = x with y, x each fp32 or bf16 (round to nearest even); same dtype: a device copy.
void cast_launch(void* y, bool y_bf16, const void* x, bool x_bf16, int64_t n, void* stream);

// x [rows, H, da + db] = [a [rows, H, da] | b [rows, Hb, db]], Hb = H or 1 (shared b).
struct HeadConcatParams {
  int64_t rows = 0, H = 0, Hb = 0, da = 0, db = 0;
};
void head_concat_forward_launch(uint16_t* x, const uint16_t* a, const uint16_t* b, const HeadConcatParams& p,
                                void* stream);
// da, db written; with Hb = 1, db[r] = sum over heads h = 0, 1, ... of dx[r, h, da:] (fp32, in order).
void head_concat_backward_launch(uint16_t* da, uint16_t* db, const uint16_t* dx, const HeadConcatParams& p,
                                 void* stream);

// ---- optimizer (optim.cu): one launch over many tensors ----
// Each launch copies a table of its tensors to the device, into scratch from `pool` (as embedding's).

// One fp32 tensor of an AdamW step; pc (optional, bf16) receives the rounded new p.
struct AdamWSlot {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  uint16_t* pc = nullptr;
  int64_t n = 0;
  double decay_factor = 1.0;
};
// PyTorch's AdamW in double per element, the moments and p stored in fp32 (kernels/ops.h):
//   g' = fp32(g * grad_scale) (scale_tensors_launch's rounding; g is not written; 1: g' = g)
//   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;  p = p decay - step m / (sqrt(v) / bc2_sqrt + eps)
void adamw_update_launch(const AdamWSlot* slots, int64_t count, double beta1, double beta2, double step_size,
                         double bc2_sqrt, double eps, double grad_scale, void* pool, void* stream);
// sum of x^2 over all tensors (fp32), deterministic; waits for the stream and returns on the host.
double sum_squares_launch(const float* const* xs, const int64_t* ns, int64_t count, void* pool, void* stream);
// x = x * factor (the product in double, rounded to fp32).
void scale_tensors_launch(float* const* xs, const int64_t* ns, int64_t count, double factor, void* pool,
                          void* stream);

}  // namespace dt::cuda
