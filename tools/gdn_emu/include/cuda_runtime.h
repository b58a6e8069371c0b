// Emulation shim of the CUDA runtime for running kernels on the CPU: one std::thread per CUDA
// thread, one block (or one cluster of blocks) at a time, std::barrier for __syncthreads, the
// cluster barrier and the warp collectives.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
#define __restrict__ __restrict

struct uint3 { unsigned x = 0, y = 0, z = 0; };
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
struct alignas(8) int2 { int x, y; };
inline int2 make_int2(int a, int b) { return {a, b}; }
using std::isnan;
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
// Loads through the read-only or the L2 path: plain loads here (device memory is the host's).
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
// Atomics and fences between CTAs: host atomics (sequentially consistent).
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned atomicInc(unsigned* p, unsigned limit) {  // old >= limit ? 0 : old + 1, returning old
  unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, old >= limit ? 0u : old + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
#define __grid_constant__
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }

typedef struct CUstream_st* cudaStream_t;
typedef struct CUmemPool_st* cudaMemPool_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorLaunchFailure = 719 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize, cudaFuncAttributeNonPortableClusterSizeAllowed };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount, cudaDevAttrComputeCapabilityMajor, cudaDevAttrClusterLaunch };
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold };
enum cudaMemcpyKind { cudaMemcpyDefault };

namespace emu {
extern thread_local uint3 tl_threadIdx, tl_blockIdx;
extern dim3 g_blockDim, g_gridDim;
extern size_t g_smem_limit;
void syncthreads();
void syncwarp();
float shfl_xor(float v, int m);
float shfl_idx(float v, int src);
float shfl_up(float v, int d);
float shfl_down(float v, int d);
int shfl_down_int(int v, int d);
unsigned char* dyn_smem();
// Runs the grid's clusters (cluster_x CTAs along x, 1 to 16) one after another, the CTAs of one
// cluster at once: a kernel launched in clusters keeps its shared memory dynamic, since a static
// __shared__ array is one copy here, shared by the cluster's CTAs.
void run_grid(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body, unsigned cluster_x = 1);
// The thread block cluster (kernels/cuda/cluster.cuh's emulation): this CTA's rank, the cluster's
// barrier, and p (in this CTA's dynamic shared memory) mapped into the CTA of another rank.
unsigned cluster_rank();
void cluster_sync();
const void* cluster_map(const void* p, unsigned rank);
template <class... P, class... A>
void launch_clusters(void (*k)(P...), dim3 g, dim3 b, size_t smem, unsigned cluster_x, A&&... args) {
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  run_grid(g, b, smem, [&] { std::apply(k, params); }, cluster_x);
}
template <class... P, class... A>
void launch(void (*k)(P...), dim3 g, dim3 b, size_t smem, cudaStream_t, A&&... args) {
  launch_clusters(k, g, b, smem, 1, std::forward<A>(args)...);
}
void* alloc(size_t n);
void release(void* p);
}  // namespace emu
// A shared-memory address as its offset in the emulated CTA's dynamic shared memory.
inline size_t __cvta_generic_to_shared(const void* p) {
  return static_cast<size_t>(static_cast<const unsigned char*>(p) - emu::dyn_smem());
}

// cudaLaunchKernelEx: of the attributes only the cluster's size matters here (kernels run one
// after another, so a programmatic dependent launch is a plain one).
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization, cudaLaunchAttributeClusterDimension };
struct cudaLaunchAttributeValue {
  int programmaticStreamSerializationAllowed;
  struct { unsigned x, y, z; } clusterDim;
};
struct cudaLaunchAttribute { cudaLaunchAttributeID id; cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned numAttrs;
};
namespace emu {
// The launch's cluster size along x: 1 without the attribute, 0 for clusters along y or z (not
// emulated).
inline unsigned cluster_x_of(const cudaLaunchConfig_t* c) {
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& d = c->attrs[i].val.clusterDim;
      return d.y == 1 && d.z == 1 ? d.x : 0;
    }
  return 1;
}
}  // namespace emu
template <class... P, class... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* c, void (*k)(P...), A&&... args) {
  const unsigned cluster_x = emu::cluster_x_of(c);
  if (cluster_x == 0) return cudaErrorInvalidValue;
  emu::launch_clusters(k, c->gridDim, c->blockDim, c->dynamicSmemBytes, cluster_x, std::forward<A>(args)...);
  return cudaSuccess;
}
// Every cluster of up to 16 CTAs fits (they run one cluster at a time).
template <class... P>
cudaError_t cudaOccupancyMaxActiveClusters(int* n, void (*)(P...), const cudaLaunchConfig_t* c) {
  const unsigned cluster_x = emu::cluster_x_of(c);
  *n = cluster_x >= 1 && cluster_x <= 16 ? 1 : 0;
  return cudaSuccess;
}
#define threadIdx (emu::tl_threadIdx)
#define blockIdx (emu::tl_blockIdx)
// Names, not macros, so that cudaLaunchConfig_t's members of the same names stay what they are.
inline const dim3& blockDim = emu::g_blockDim;
inline const dim3& gridDim = emu::g_gridDim;
inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::syncwarp(); }
inline float __shfl_xor_sync(unsigned, float v, int m) { return emu::shfl_xor(v, m); }
inline float __shfl_sync(unsigned, float v, int src) { return emu::shfl_idx(v, src); }
inline float __shfl_up_sync(unsigned, float v, int d) { return emu::shfl_up(v, d); }
inline float __shfl_down_sync(unsigned, float v, int d) { return emu::shfl_down(v, d); }
inline int __shfl_down_sync(unsigned, int v, int d) { return emu::shfl_down_int(v, d); }

inline const char* cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { *p = emu::alloc(n); return cudaSuccess; }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { emu::release(p); return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t n) { *p = emu::alloc(n); return cudaSuccess; }
inline cudaError_t cudaFree(void* p) { emu::release(p); return cudaSuccess; }
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute a, int v) {
  if (a == cudaFuncAttributeNonPortableClusterSizeAllowed) return cudaSuccess;
  if (v > 232448) return cudaErrorInvalidValue;
  emu::g_smem_limit = static_cast<size_t>(v);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
struct cudaFuncAttributes {};
template <class K>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, K) { return cudaSuccess; }
// 132 SMs, or EMU_SMS (e.g. 1, so that small grids take every rotation of tc_cta_rotation).
// Compute capability 8: the emulator runs kernels one after another, as a device without
// programmatic dependent launch does, so plan_gdn launches no kernel that waits for a later one.
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int) {
  if (attr == cudaDevAttrComputeCapabilityMajor) {
    *v = 8;
    return cudaSuccess;
  }
  if (attr == cudaDevAttrClusterLaunch) {  // thread block clusters: emulated (run_grid)
    *v = 1;
    return cudaSuccess;
  }
  const char* s = std::getenv("EMU_SMS");
  *v = s ? std::atoi(s) : 132;
  return cudaSuccess;
}
// Memory pools: one stands for all (device memory is the host's).
enum cudaMemAllocationType { cudaMemAllocationTypePinned = 1 };
enum cudaMemLocationType { cudaMemLocationTypeDevice = 1 };
struct cudaMemLocation { cudaMemLocationType type; int id; };
struct cudaMemPoolProps { cudaMemAllocationType allocType; cudaMemLocation location; };
inline cudaError_t cudaMemPoolCreate(cudaMemPool_t* p, const cudaMemPoolProps*) {
  static int pool;
  *p = reinterpret_cast<cudaMemPool_t>(&pool);
  return cudaSuccess;
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone, cudaStreamCaptureStatusActive };
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* c) {  // no graphs here
  *c = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaMallocFromPoolAsync(void** p, size_t n, cudaMemPool_t, cudaStream_t) {
  *p = emu::alloc(n);
  return cudaSuccess;
}
