// The per-context state behind kernels/cuda_context.h: handles, workspaces and plan caches of the
// GEMMs (gemm.cpp), the cuDNN attention (attention_cudnn.cpp) and cross-entropy's target check
// (cross_entropy_ops.cpp). Host code only (g++): it names CUDA and cuBLASLt types, never cuDNN's.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_check.h"
#include "kernels/cuda/dense_mm_launch.h"

// Every cuBLASLt call is checked (CUDA runtime calls: DT_CUDA_OK of core/cuda_check.h); the message
// names the op and the source line.
#define DT_CUBLAS_OK(call, op)                                                                             \
  do {                                                                                                    \
    cublasStatus_t st_ = (call);                                                                          \
    DT_CHECK(st_ == CUBLAS_STATUS_SUCCESS, "{}: cuBLASLt error {} ({}) at {}:{}", op,                     \
             static_cast<int>(st_), cublasLtGetStatusString(st_), __FILE__, __LINE__);                      \
  } while (0)

namespace dt::cuda {

// One GEMM problem in cuBLASLt's column-major terms, D[m, n] = alpha op(A) op(B) + beta C, C = D.
// The pointer alignments are part of the key: an algorithm chosen for 16-byte-aligned operands may not
// run on 2-byte-aligned ones.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool trans_a = false, trans_b = false;
  int a_type = 0, b_type = 0, c_type = 0;  // cudaDataType_t
  int align_a = 0, align_b = 0, align_c = 0;
  auto operator<=>(const GemmKey&) const = default;
};

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

// The cuDNN SDPA graphs (attention_cudnn.cpp); the deleter lives there too.
struct AttentionCache;
void destroy_attention_cache(AttentionCache* cache);
struct AttentionCacheDeleter {
  void operator()(AttentionCache* cache) const { destroy_attention_cache(cache); }
};

inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation on Hopper

struct CudaState {
  int device = 0;
  cudaStream_t stream = nullptr;
  // The context's own stream-ordered memory pool (cudaMemPoolCreate) for the ops' scratch, keeping
  // what it has grown to (release threshold: everything). The device's default pool is left as it is.
  cudaMemPool_t pool = nullptr;

  cublasLtHandle_t cublaslt = nullptr;
  void* gemm_workspace = nullptr;  // kGemmWorkspaceBytes, allocated once
  std::map<GemmKey, GemmPlan> gemm_plans;

  void* cudnn = nullptr;  // cudnnHandle_t; null when built without cuDNN
  void* attention_workspace = nullptr;
  size_t attention_workspace_bytes = 0;
  std::unique_ptr<AttentionCache, AttentionCacheDeleter> attention;

  int* ce_bad_row = nullptr;       // device: the first row with a target outside [0, V), or INT_MAX-ish
  int* ce_bad_row_host = nullptr;  // pinned host copy
  // Tests and benchmarks only (set_cross_entropy_variant_for_testing): the cross-entropy variant this
  // context prefers; unset: the plan's default.
  std::optional<CrossEntropyVariant> ce_variant_for_testing;
};

// The state of a Context made by make_cuda_context; a clear error for any other Context.
CudaState& cuda_state(Context& ctx, const char* op);

// The attention workspace, grown (after the stream drains) when `bytes` is more than it holds.
void* attention_workspace(CudaState& s, size_t bytes, const char* op);

}  // namespace dt::cuda
