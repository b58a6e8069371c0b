// Token embedding on the GPU (math: kernels/cpu/embedding.h); ids int32, w and y bf16, dw fp32:
//   forward:  y[i, :] = w[ids[i], :]            (torch: F.embedding(ids, w))
//   backward: dw[ids[i], :] += dy[i, :]         (accumulated; repeated ids add up)
// The backward is deterministic without float atomics:
//   1. key[i] = ids[i] (or vocab, a sentinel, for an id outside [0, vocab)), pos[i] = i;
//   2. a stable radix sort of (key, pos) (cub::DeviceRadixSort): equal ids become one run, their
//      positions in increasing order;
//   3. CTA (i, column slice) does nothing unless sorted index i starts a run; then its threads
//      (V columns each) start from the dw row and add dy[pos] for the run's positions in order:
//      the additions happen in the same order as in the CPU reference's loop.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_elem.h"

namespace dt::cuda {

namespace {

constexpr int kThreads = 128;  // column vectors per CTA in the backward (V columns each)

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int V>
__global__ void embedding_forward_kernel(uint16_t* y, const int32_t* ids, const uint16_t* w, int64_t n, int64_t vocab,
                                         int64_t dim) {
  const int64_t per_row = dim / V, total = n * per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / per_row, c = (e % per_row) * V;
    const int64_t id = ids[i];
    float f[V];
    if (id >= 0 && id < vocab) {
      load_bf16<V>(w + id * dim + c, f);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = __uint_as_float(0x7fc00000u);  // NaN: a bad id must not pass silently
    }
    store_bf16<V>(y + i * dim + c, f);
  }
}

__global__ void embedding_keys_kernel(uint32_t* keys, int32_t* pos, const int32_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t id = ids[i];
    keys[i] = (id >= 0 && id < vocab) ? static_cast<uint32_t>(id) : static_cast<uint32_t>(vocab);
    pos[i] = static_cast<int32_t>(i);
  }
}

// blockIdx.x: sorted index i; blockIdx.y: a slice of kThreads * V columns.
template <int V>
__global__ void embedding_backward_kernel(float* dw, const uint16_t* dy, const uint32_t* keys, const int32_t* pos,
                                          int64_t n, int64_t vocab, int64_t dim) {
  const int64_t i = blockIdx.x;
  const uint32_t key = keys[i];
  if ((i > 0 && keys[i - 1] == key) || key >= static_cast<uint64_t>(vocab)) return;  // not a run start, or bad ids
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x) * V;
  if (c >= dim) return;
  float* row = dw + static_cast<int64_t>(key) * dim + c;
  float acc[V];
  load_f32<V>(row, acc);
  for (int64_t j = i; j < n && keys[j] == key; ++j) {
    float d[V];
    load_bf16<V>(dy + static_cast<int64_t>(pos[j]) * dim + c, d);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] += d[k];
  }
  store_f32<V>(row, acc);
}

int key_bits(int64_t vocab) {  // bits holding 0..vocab (the sentinel included)
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}

// Scratch layout: keys_in, keys_out, pos_in, pos_out (n x 4 bytes each), then CUB's temporary storage.
struct Scratch {
  uint32_t *keys_in, *keys_out;
  int32_t *pos_in, *pos_out;
  void* cub_temp;
  size_t cub_bytes;
};

int64_t round_up(int64_t x) { return (x + 255) / 256 * 256; }

size_t cub_temp_bytes(int64_t n, int64_t vocab) {
  size_t bytes = 0;
  DT_CUDA_OK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr),
                                             static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
                                             key_bits(vocab)),
             "embedding_backward (radix sort size query)");
  return bytes;
}

Scratch carve(void* base, int64_t n, size_t cub_bytes) {
  char* p = static_cast<char*>(base);
  const int64_t arr = round_up(n * 4);
  Scratch s;
  s.keys_in = reinterpret_cast<uint32_t*>(p);
  s.keys_out = reinterpret_cast<uint32_t*>(p + arr);
  s.pos_in = reinterpret_cast<int32_t*>(p + 2 * arr);
  s.pos_out = reinterpret_cast<int32_t*>(p + 3 * arr);
  s.cub_temp = p + 4 * arr;
  s.cub_bytes = cub_bytes;
  return s;
}

}  // namespace

void embedding_forward_launch(uint16_t* y, const int32_t* ids, const uint16_t* w, int64_t n, int64_t vocab,
                              int64_t dim, void* stream) {
  const char* op = "embedding_forward";
  DT_CHECK(y && ids && w, "{}: null tensor pointer", op);
  const int64_t total = n * dim;
  if (total == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (dim % 8 == 0 && aligned(y, 16) && aligned(w, 16)) {
    const int64_t work = total / 8;
    const int grid = static_cast<int>(std::min<int64_t>((work + 255) / 256, 1 << 16));
    embedding_forward_kernel<8><<<grid, 256, 0, s>>>(y, ids, w, n, vocab, dim);
  } else {
    const int grid = static_cast<int>(std::min<int64_t>((total + 255) / 256, 1 << 16));
    embedding_forward_kernel<1><<<grid, 256, 0, s>>>(y, ids, w, n, vocab, dim);
  }
  DT_CUDA_OK(cudaGetLastError(), op);
}

int64_t embedding_backward_scratch_bytes(int64_t n, int64_t vocab) {
  if (n == 0) return 0;
  return 4 * round_up(n * 4) + static_cast<int64_t>(cub_temp_bytes(n, vocab));
}

void embedding_backward_launch(float* dw, const uint16_t* dy, const int32_t* ids, int64_t n, int64_t vocab,
                               int64_t dim, void* scratch, void* pool, void* stream) {
  const char* op = "embedding_backward";
  DT_CHECK(dw && dy && ids, "{}: null tensor pointer", op);
  DT_CHECK(n < (int64_t{1} << 31), "{}: {} tokens exceed the radix sort's int32 count", op, n);
  DT_CHECK(vocab >= 1 && vocab < (int64_t{1} << 31) - 1, "{}: vocabulary size {} out of range", op, vocab);
  if (n == 0 || dim == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const size_t cub_bytes = cub_temp_bytes(n, vocab);
  const int64_t bytes = 4 * round_up(n * 4) + static_cast<int64_t>(cub_bytes);
  void* base = scratch;
  if (!base) DT_CUDA_OK(scratch_malloc(&base, static_cast<size_t>(bytes), pool, s), op);
  Scratch sc = carve(base, n, cub_bytes);

  const int grid = static_cast<int>(std::min<int64_t>((n + 255) / 256, 1 << 16));
  embedding_keys_kernel<<<grid, 256, 0, s>>>(sc.keys_in, sc.pos_in, ids, n, vocab);
  DT_CUDA_OK(cudaGetLastError(), op);
  size_t temp = sc.cub_bytes;
  DT_CUDA_OK(cub::DeviceRadixSort::SortPairs(sc.cub_temp, temp, sc.keys_in, sc.keys_out, sc.pos_in,
                                             sc.pos_out, static_cast<int>(n), 0, key_bits(vocab), s),
             op);

  const bool vec = dim % 8 == 0 && aligned(dw, 16) && aligned(dy, 16);
  const int V = vec ? 8 : 1;
  const int64_t slices = (dim / V + kThreads - 1) / kThreads;
  DT_CHECK(slices <= 65535, "{}: embedding dim {} too large for the backward grid", op, dim);
  const dim3 grid2(static_cast<unsigned>(n), static_cast<unsigned>(slices));
  if (vec)
    embedding_backward_kernel<8><<<grid2, kThreads, 0, s>>>(dw, dy, sc.keys_out, sc.pos_out, n, vocab, dim);
  else
    embedding_backward_kernel<1><<<grid2, kThreads, 0, s>>>(dw, dy, sc.keys_out, sc.pos_out, n, vocab, dim);
  DT_CUDA_OK(cudaGetLastError(), op);
  if (!scratch) DT_CUDA_OK(cudaFreeAsync(base, s), op);
}

}  // namespace dt::cuda
