// make_cuda_context (kernels/cuda_context.h): creates, and on destruction releases, one GPU's
// stream, cuBLASLt and cuDNN handles, workspaces and plan caches (kernels/cuda/dense_mm_state.h).
#include "kernels/cuda_context.h"


#include "core/device.h"
#include "kernels/cuda/dense_mm_state.h"

#ifdef DELTATRON_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace dt {

namespace cuda {

CudaState& cuda_state(Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCUDA && ctx.cuda_state != nullptr,
           "{}: the Context has no CUDA state (device {}); create it with dt::make_cuda_context(device_index) "
           "from kernels/cuda_context.h",
           op, ctx.device == Device::kCUDA ? "cuda" : "cpu");
  return *static_cast<CudaState*>(ctx.cuda_state);
}

void* attention_workspace(CudaState& s, size_t bytes, const char* op) {
  if (bytes <= s.attention_workspace_bytes) return s.attention_workspace;
  // Only at the first call of a shape that needs more: a step in steady state never gets here. The old
  // buffer may still be read by queued work, so the stream drains before it is freed.
  DT_CUDA_OK(cudaStreamSynchronize(s.stream), op);
  if (s.attention_workspace) DT_CUDA_OK(cudaFree(s.attention_workspace), op);
  s.attention_workspace = nullptr;
  s.attention_workspace_bytes = 0;
  const size_t rounded = (bytes + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);  // whole MiB
  DT_CUDA_OK(cudaMalloc(&s.attention_workspace, rounded), op);
  s.attention_workspace_bytes = rounded;
  return s.attention_workspace;
}

namespace {

// Releases what `s` holds; never throws (it runs in destructors), errors are ignored.
void release(CudaState& s) {
  if (s.stream) cudaStreamSynchronize(s.stream);
  for (auto& [key, plan] : s.gemm_plans) {
    if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
    if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
  }
  s.gemm_plans.clear();
  s.attention.reset();  // the cuDNN graphs, before their handle goes
#ifdef DELTATRON_HAVE_CUDNN
  if (s.cudnn) cudnnDestroy(static_cast<cudnnHandle_t>(s.cudnn));
#endif
  s.cudnn = nullptr;
  if (s.cublaslt) cublasLtDestroy(s.cublaslt);
  s.cublaslt = nullptr;
  if (s.gemm_workspace) cudaFree(s.gemm_workspace);
  if (s.attention_workspace) cudaFree(s.attention_workspace);
  if (s.ce_bad_row) cudaFree(s.ce_bad_row);
  if (s.ce_bad_row_host) cudaFreeHost(s.ce_bad_row_host);
  s.gemm_workspace = s.attention_workspace = nullptr;
  s.ce_bad_row = s.ce_bad_row_host = nullptr;
  if (s.stream) cudaStreamDestroy(s.stream);
  s.stream = nullptr;
  if (s.pool) cudaMemPoolDestroy(s.pool);  // after the stream: its frees have completed
  s.pool = nullptr;
}

}  // namespace

}  // namespace cuda

CudaContextOwner::CudaContextOwner(int device_index) : state_(std::make_unique<cuda::CudaState>()) {
  const char* op = "make_cuda_context";
  const int n = cuda_device_count();
  DT_CHECK(device_index >= 0 && device_index < n,
           "{}: GPU {} does not exist: this machine has {} CUDA device(s) (is the driver loaded, is "
           "CUDA_VISIBLE_DEVICES set?)",
           op, device_index, n);
  cuda::CudaState& s = *state_;
  s.device = device_index;
  try {
    DT_CUDA_OK(cudaSetDevice(device_index), op);
    // A blocking stream: it orders with the legacy default stream that device_copy's cudaMemcpy uses.
    DT_CUDA_OK(cudaStreamCreate(&s.stream), op);
    // Scratch of the ops comes stream-ordered from the context's own pool. It keeps what it has grown
    // to instead of returning it to the driver at every synchronisation: after the first step the
    // pool serves every request, so the step loop makes no driver allocation. A private pool, so the
    // process's other CUDA users see the device's default pool unchanged.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_index;
    DT_CUDA_OK(cudaMemPoolCreate(&s.pool, &props), op);
    uint64_t keep_all = UINT64_MAX;
    DT_CUDA_OK(cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReleaseThreshold, &keep_all), op);
    DT_CUBLAS_OK(cublasLtCreate(&s.cublaslt), op);
    DT_CUDA_OK(cudaMalloc(&s.gemm_workspace, cuda::kGemmWorkspaceBytes), op);
#ifdef DELTATRON_HAVE_CUDNN
    cudnnHandle_t h = nullptr;
    cudnnStatus_t st = cudnnCreate(&h);
    DT_CHECK(st == CUDNN_STATUS_SUCCESS,
             "{}: cudnnCreate failed: {} (cuDNN {} linked; its libraries must sit beside libcudnn.so.9 and "
             "match the driver)",
             op, cudnnGetErrorString(st), cudnnGetVersion());
    s.cudnn = h;
    st = cudnnSetStream(h, s.stream);
    DT_CHECK(st == CUDNN_STATUS_SUCCESS, "{}: cudnnSetStream failed: {}", op, cudnnGetErrorString(st));
#endif
    DT_CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&s.ce_bad_row), sizeof(int)), op);
    DT_CUDA_OK(cudaMallocHost(reinterpret_cast<void**>(&s.ce_bad_row_host), sizeof(int)), op);
  } catch (...) {
    cuda::release(s);
    throw;
  }
  ctx_.device = Device::kCUDA;
  ctx_.device_index = device_index;
  ctx_.stream = s.stream;
  ctx_.cublaslt = s.cublaslt;
  ctx_.cudnn = s.cudnn;
  ctx_.cuda_state = &s;
}

CudaContextOwner::~CudaContextOwner() {
  if (state_) cuda::release(*state_);
}

void* cuda_scratch_pool(const Context& ctx) {
  return ctx.device == Device::kCUDA && ctx.cuda_state ? static_cast<const cuda::CudaState*>(ctx.cuda_state)->pool
                                                       : nullptr;
}

void CudaContextOwner::synchronize() { DT_CUDA_OK(cudaStreamSynchronize(state_->stream), "synchronize"); }

std::unique_ptr<CudaContextOwner> make_cuda_context(int device_index) {
  return std::make_unique<CudaContextOwner>(device_index);
}

int cudnn_runtime_version() {
#ifdef DELTATRON_HAVE_CUDNN
  return static_cast<int>(cudnnGetVersion());
#else
  return 0;
#endif
}

}  // namespace dt
