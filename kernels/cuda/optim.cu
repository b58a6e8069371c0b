// The optimizer's multi-tensor ops on the GPU (math: kernels/ops_optim.cpp), fp32 tensors:
//   adamw:        g' = fp32(g * grad_scale) (the clipping factor; skipped at 1);
//                 m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//                 p = p decay - step m / (sqrt(v) / bc2_sqrt + eps);   pc = bf16(p) when wanted
//   sum_squares:  sum over every element of every tensor of x^2
//   scale:        x = x * factor
// One launch covers all tensors: the host builds a table of slots (one per tensor, with the index
// of its first kChunk-element chunk), copies it to the device with cudaMemcpyAsync, and CTA b
// finds its slot by binary search over the first-chunk indices. Inside a chunk each thread takes
// float4 vectors (when the tensor's pointers are aligned), then the tail one by one.
//
// AdamW runs in double with explicitly rounded operations (__dmul_rn, ..., no FMA contraction),
// the order of kernels/ops_optim.cpp's CPU loop, so the two agree to the bit; an H200 has FP64 to
// spare for a memory-bound kernel. sum_squares is deterministic: fixed chunks, fp32 sums of four
// squares accumulated in double per thread, a fixed tree per CTA, one CTA summing the per-chunk
// partials in a fixed order.
#include <algorithm>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_elem.h"

namespace dt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16384;  // elements per CTA (a multiple of 4)

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

struct AdamWDevSlot {
  float* p;
  const float* g;
  float* m;
  float* v;
  uint16_t* pc;
  int64_t n, first_chunk;
  double decay;
  int vec;
};

struct TensorDevSlot {  // sum_squares, scale
  float* x;
  int64_t n, first_chunk;
  int vec;
};

struct AdamWScalars {
  double b1, one_minus_b1, b2, one_minus_b2, step, bc2_sqrt, eps, grad_scale;
};

// The last slot whose first chunk is <= `block` (slots with no elements are never in the table).
template <class Slot>
__device__ const Slot& slot_of(const Slot* slots, int64_t count, int64_t block) {
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (slots[mid].first_chunk <= block) lo = mid;
    else hi = mid - 1;
  }
  return slots[lo];
}

// The CPU loop's arithmetic, in double, every operation rounded as written. kScaleGrad: g first
// goes through scale_kernel's rounding, fp32(g * grad_scale), so the update has the bits of
// scale_tensors then the update at scale 1, without the pass that writes the scaled gradients.
template <bool kScaleGrad>
__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, float* pc_out, double decay,
                                          const AdamWScalars& s) {
  const double gi = kScaleGrad ? static_cast<double>(__double2float_rn(__dmul_rn(static_cast<double>(g), s.grad_scale)))
                               : static_cast<double>(g);
  const float mn = __double2float_rn(__dadd_rn(__dmul_rn(s.b1, static_cast<double>(m)), __dmul_rn(s.one_minus_b1, gi)));
  const float vn = __double2float_rn(
      __dadd_rn(__dmul_rn(s.b2, static_cast<double>(v)), __dmul_rn(__dmul_rn(s.one_minus_b2, gi), gi)));
  const double denom = __dadd_rn(__ddiv_rn(__dsqrt_rn(static_cast<double>(vn)), s.bc2_sqrt), s.eps);
  const double pn = __dsub_rn(__dmul_rn(static_cast<double>(p), decay),
                              __ddiv_rn(__dmul_rn(s.step, static_cast<double>(mn)), denom));
  p = __double2float_rn(pn), m = mn, v = vn;
  *pc_out = p;
}

template <bool kScaleGrad>
__global__ void __launch_bounds__(kThreads) adamw_kernel(const AdamWDevSlot* slots, int64_t count, AdamWScalars sc) {
  const AdamWDevSlot& t = slot_of(slots, count, blockIdx.x);
  const int64_t begin = (blockIdx.x - t.first_chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  const int64_t n_vec = t.vec ? (end - begin) / 4 : 0;
  for (int64_t q = threadIdx.x; q < n_vec; q += kThreads) {
    const int64_t i = begin + 4 * q;
    float p[4], g[4], m[4], v[4], pc[4];
    load_f32<4>(t.p + i, p), load_f32<4>(t.g + i, g), load_f32<4>(t.m + i, m), load_f32<4>(t.v + i, v);
#pragma unroll
    for (int k = 0; k < 4; ++k) adamw_one<kScaleGrad>(p[k], g[k], m[k], v[k], &pc[k], t.decay, sc);
    store_f32<4>(t.p + i, p), store_f32<4>(t.m + i, m), store_f32<4>(t.v + i, v);
    if (t.pc) store_bf16<4>(t.pc + i, pc);
  }
  for (int64_t i = begin + 4 * n_vec + threadIdx.x; i < end; i += kThreads) {
    float pc[1];
    adamw_one<kScaleGrad>(t.p[i], t.g[i], t.m[i], t.v[i], &pc[0], t.decay, sc);
    if (t.pc) store_bf16<1>(t.pc + i, pc);
  }
}

__global__ void __launch_bounds__(kThreads) sum_squares_kernel(const TensorDevSlot* slots, int64_t count,
                                                               double* partial) {
  const TensorDevSlot& t = slot_of(slots, count, blockIdx.x);
  const int64_t begin = (blockIdx.x - t.first_chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  const int64_t n_vec = t.vec ? (end - begin) / 4 : 0;
  double acc = 0.0;
  for (int64_t q = threadIdx.x; q < n_vec; q += kThreads) {
    float f[4];
    load_f32<4>(t.x + begin + 4 * q, f);
    acc += static_cast<double>((f[0] * f[0] + f[1] * f[1]) + (f[2] * f[2] + f[3] * f[3]));
  }
  for (int64_t i = begin + 4 * n_vec + threadIdx.x; i < end; i += kThreads) {
    const float f = t.x[i];
    acc += static_cast<double>(f * f);
  }
  const double total = block_sum_tree<kThreads>(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads) sum_partials_kernel(const double* partial, int64_t n, double* out) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) acc += partial[i];
  const double total = block_sum_tree<kThreads>(acc);
  if (threadIdx.x == 0) *out = total;
}

__global__ void __launch_bounds__(kThreads) scale_kernel(const TensorDevSlot* slots, int64_t count, double factor) {
  const TensorDevSlot& t = slot_of(slots, count, blockIdx.x);
  const int64_t begin = (blockIdx.x - t.first_chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  const int64_t n_vec = t.vec ? (end - begin) / 4 : 0;
  for (int64_t q = threadIdx.x; q < n_vec; q += kThreads) {
    float f[4];
    load_f32<4>(t.x + begin + 4 * q, f);
#pragma unroll
    for (int k = 0; k < 4; ++k) f[k] = __double2float_rn(__dmul_rn(static_cast<double>(f[k]), factor));
    store_f32<4>(t.x + begin + 4 * q, f);
  }
  for (int64_t i = begin + 4 * n_vec + threadIdx.x; i < end; i += kThreads)
    t.x[i] = __double2float_rn(__dmul_rn(static_cast<double>(t.x[i]), factor));
}

int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

// Device copy of a host table, allocated stream-ordered from `pool`; the caller frees it with cudaFreeAsync.
// A pageable host source is staged before cudaMemcpyAsync returns, so `host` may die afterwards.
template <class Slot>
Slot* upload_table(const std::vector<Slot>& host, void* pool, cudaStream_t s, const char* op) {
  Slot* dev = nullptr;
  const size_t bytes = host.size() * sizeof(Slot);
  DT_CUDA_OK(scratch_malloc(reinterpret_cast<void**>(&dev), bytes, pool, s), op);
  DT_CUDA_OK(cudaMemcpyAsync(dev, host.data(), bytes, cudaMemcpyHostToDevice, s), op);
  return dev;
}

// Slots for the non-empty tensors; returns the total chunk count.
int64_t tensor_table(std::vector<TensorDevSlot>& out, float* const* xs, const int64_t* ns, int64_t count,
                     const char* op) {
  int64_t chunks = 0;
  for (int64_t k = 0; k < count; ++k) {
    if (ns[k] == 0) continue;
    DT_CHECK(xs[k] && ns[k] > 0, "{}: tensor {} has a null pointer or a negative size", op, k);
    out.push_back(TensorDevSlot{xs[k], ns[k], chunks, aligned(xs[k], 16) ? 1 : 0});
    chunks += chunks_of(ns[k]);
  }
  DT_CHECK(chunks < (int64_t{1} << 31), "{}: {} chunks exceed the grid", op, chunks);
  return chunks;
}

}  // namespace

void adamw_update_launch(const AdamWSlot* slots, int64_t count, double beta1, double beta2, double step_size,
                         double bc2_sqrt, double eps, double grad_scale, void* pool, void* stream) {
  const char* op = "adamw_update";
  std::vector<AdamWDevSlot> table;
  int64_t chunks = 0;
  for (int64_t k = 0; k < count; ++k) {
    const AdamWSlot& t = slots[k];
    if (t.n == 0) continue;
    DT_CHECK(t.p && t.g && t.m && t.v && t.n > 0, "{}: tensor {} has a null pointer or a negative size", op, k);
    const bool vec = aligned(t.p, 16) && aligned(t.g, 16) && aligned(t.m, 16) && aligned(t.v, 16) &&
                     (!t.pc || aligned(t.pc, 8));
    table.push_back(AdamWDevSlot{t.p, t.g, t.m, t.v, t.pc, t.n, chunks, t.decay_factor, vec ? 1 : 0});
    chunks += chunks_of(t.n);
  }
  if (table.empty()) return;
  DT_CHECK(chunks < (int64_t{1} << 31), "{}: {} chunks exceed the grid", op, chunks);
  auto s = static_cast<cudaStream_t>(stream);
  const AdamWScalars sc{beta1, 1.0 - beta1, beta2, 1.0 - beta2, step_size, bc2_sqrt, eps, grad_scale};
  AdamWDevSlot* dev = upload_table(table, pool, s, op);
  const auto kernel = grad_scale != 1.0 ? adamw_kernel<true> : adamw_kernel<false>;  // 1: g' = g, no multiply
  kernel<<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(dev, static_cast<int64_t>(table.size()), sc);
  DT_CUDA_OK(cudaGetLastError(), op);
  DT_CUDA_OK(cudaFreeAsync(dev, s), op);
}

double sum_squares_launch(const float* const* xs, const int64_t* ns, int64_t count, void* pool, void* stream) {
  const char* op = "sum_squares";
  std::vector<TensorDevSlot> table;
  // The kernel only reads x; the slot type is shared with scale.
  const int64_t chunks = tensor_table(table, const_cast<float* const*>(xs), ns, count, op);
  if (table.empty()) return 0.0;
  auto s = static_cast<cudaStream_t>(stream);
  TensorDevSlot* dev = upload_table(table, pool, s, op);
  double* partial = nullptr;  // [chunks] per-chunk sums, then the total
  DT_CUDA_OK(scratch_malloc(reinterpret_cast<void**>(&partial), (chunks + 1) * sizeof(double), pool, s), op);
  sum_squares_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(dev, static_cast<int64_t>(table.size()),
                                                                        partial);
  DT_CUDA_OK(cudaGetLastError(), op);
  sum_partials_kernel<<<1, kThreads, 0, s>>>(partial, chunks, partial + chunks);
  DT_CUDA_OK(cudaGetLastError(), op);
  double result = 0.0;
  DT_CUDA_OK(cudaMemcpyAsync(&result, partial + chunks, sizeof(double), cudaMemcpyDeviceToHost, s), op);
  DT_CUDA_OK(cudaFreeAsync(partial, s), op);
  DT_CUDA_OK(cudaFreeAsync(dev, s), op);
  DT_CUDA_OK(cudaStreamSynchronize(s), op);
  return result;
}

void scale_tensors_launch(float* const* xs, const int64_t* ns, int64_t count, double factor, void* pool,
                          void* stream) {
  const char* op = "scale_tensors";
  std::vector<TensorDevSlot> table;
  const int64_t chunks = tensor_table(table, xs, ns, count, op);
  if (table.empty()) return;
  auto s = static_cast<cudaStream_t>(stream);
  TensorDevSlot* dev = upload_table(table, pool, s, op);
  scale_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(dev, static_cast<int64_t>(table.size()), factor);
  DT_CUDA_OK(cudaGetLastError(), op);
  DT_CUDA_OK(cudaFreeAsync(dev, s), op);
}

}  // namespace dt::cuda
