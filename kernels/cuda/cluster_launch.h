// Host side of thread block clusters (kernels/cuda/cluster.cuh): launch_dependent's launch
// (kernels/cuda/common.cuh) in clusters, and whether the device runs a kernel's clusters at all.
// Plain CUDA runtime calls, so the CPU emulation (tools/gdn_emu) takes this file as it is.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace dt::cuda {

// launch_dependent's launch configuration in thread block clusters of cluster_x CTAs along x
// (grid.x a multiple of it).
inline cudaLaunchConfig_t cluster_config(dim3 grid, unsigned cluster_x, dim3 block, size_t smem, cudaStream_t s,
                                         cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
  attrs[0] = {}, attrs[1] = {};
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim.x = cluster_x, attrs[1].val.clusterDim.y = 1, attrs[1].val.clusterDim.z = 1;
  cfg.attrs = attrs, cfg.numAttrs = 2;
  return cfg;
}

// Whether the device runs the kernel's clusters of cluster_x CTAs, block threads and smem bytes of
// dynamic shared memory each. Above 8 CTAs, a size GPUs need not support, it first allows the
// kernel non-portable sizes. Ask it before launch_dependent_clusters on stream s. The answer is
// kept per (device, kernel, cluster size, block, shared memory), so that a launch captured into a
// CUDA graph after an eager one asks the device nothing; while s is being captured, an answer not
// yet known is no (the caller's launch without clusters), and the device is not asked.
template <class... Params>
bool cluster_fits(void (*kernel)(Params...), dim3 grid, unsigned cluster_x, dim3 block, size_t smem,
                  cudaStream_t s) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, unsigned, unsigned, size_t>, bool> known;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  const auto key = std::make_tuple(dev, reinterpret_cast<const void*>(kernel), cluster_x, block.x, smem);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return false;
  int ok = 0, n = 0;
  bool fits = cudaDeviceGetAttribute(&ok, cudaDevAttrClusterLaunch, dev) == cudaSuccess && ok;
  if (fits) {
    if (cluster_x > 8) fits = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    cudaLaunchAttribute attrs[2];
    cudaLaunchConfig_t cfg = cluster_config(grid, cluster_x, block, smem, nullptr, attrs);
    cfg.attrs = &attrs[1], cfg.numAttrs = 1;  // the cluster's size alone
    fits = fits && cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) == cudaSuccess && n > 0;
    if (!fits) (void)cudaGetLastError();  // a size the device refuses is an answer here, not an error to keep
  }
  known[key] = fits;
  return fits;
}

template <class... Params, class... Args>
cudaError_t launch_dependent_clusters(void (*kernel)(Params...), dim3 grid, unsigned cluster_x, dim3 block,
                                      size_t smem, cudaStream_t s, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t cfg = cluster_config(grid, cluster_x, block, smem, s, attrs);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace dt::cuda
