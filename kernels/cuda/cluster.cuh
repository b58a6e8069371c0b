// Thread block clusters (sm_90, cooperative_groups): the CTAs of a cluster run at the same time on
// one GPC, meet at the cluster's barrier, and read each other's shared memory. Launch in clusters
// with launch_dependent_clusters (kernels/cuda/common.cuh). The CPU emulation (tools/gdn_emu) has
// its own form of this header.
#pragma once

#include <cooperative_groups.h>

namespace dt::cuda {

// This CTA's rank in its cluster (x-fastest, as blockIdx within the cluster).
__device__ __forceinline__ unsigned cluster_rank() { return cooperative_groups::this_cluster().block_rank(); }

// Every thread of every CTA of the cluster arrives and waits; the shared-memory writes before it
// are visible to the cluster's CTAs after it (release, acquire).
__device__ __forceinline__ void cluster_sync() { cooperative_groups::this_cluster().sync(); }

// p, an address in this CTA's shared memory, in the CTA of rank `rank` (distributed shared
// memory: read it only while that CTA runs, i.e. before a cluster_sync that it also waits on).
template <class T>
__device__ __forceinline__ const T* cluster_smem(const T* p, unsigned rank) {
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
}

}  // namespace dt::cuda
