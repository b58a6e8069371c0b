#include "trainer/runtime.h"

#include <fmt/format.h>

#include <cstdlib>

#include "core/device.h"
#include "core/error.h"

#ifdef DELTATRON_HAVE_CUDA
#include "kernels/cuda_context.h"
#endif

namespace dt {

namespace {

bool cuda_built() {
#ifdef DELTATRON_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

// Under mpirun each rank takes the GPU of its rank on the node (Open MPI, MPICH and Slurm say it in
// the environment), so that the ranks of a node spread over its GPUs; a single process takes GPU 0.
int local_gpu_index() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(var)) {
      const int n = cuda_device_count();
      return n > 0 ? std::atoi(v) % n : 0;
    }
  }
  return 0;
}

}  // namespace

Device resolve_device(const std::string& setting) {
  if (setting == "cpu") return Device::kCPU;
  DT_CHECK(setting == "auto" || setting == "cuda", "device '{}': give auto, cpu or cuda", setting);
  const bool gpu = cuda_built() && cuda_device_count() > 0;
  if (setting == "cuda") {
    DT_CHECK(cuda_built(), "device cuda: this build of deltatron has no CUDA backend (nvcc was not found when it was "
             "configured); rebuild on a machine with the CUDA toolkit, or train with --device cpu");
    DT_CHECK(gpu, "device cuda: no GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES), or train with "
             "--device cpu");
  }
  return gpu ? Device::kCUDA : Device::kCPU;
}

std::string describe_device(Device device, const std::string& setting) {
  if (device == Device::kCUDA) {
    const int i = local_gpu_index();
    return fmt::format("device: cuda:{} ({}), bf16 mixed precision", i, cuda_device_name(i));
  }
  if (setting == "auto")
    return fmt::format("device: cpu, fp32 ({})", cuda_built() ? "no GPU is visible" : "this build has no CUDA backend");
  return "device: cpu, fp32";
}

Runtime::Runtime(Device device) {
  ctx_.device = device;
  if (device == Device::kCPU) return;
#ifdef DELTATRON_HAVE_CUDA
  std::shared_ptr<CudaContextOwner> owner = make_cuda_context(local_gpu_index());
  ctx_ = owner->context();  // plain pointers to what the owner keeps alive
  owner_ = owner;
#else
  DT_FAIL("this build has no CUDA backend");
#endif
}

Runtime::~Runtime() {
  if (ctx_.device == Device::kCUDA) {
    try {
      device_synchronize();
    } catch (...) {
    }
  }
}

void Runtime::synchronize() {
  if (ctx_.device == Device::kCUDA) device_synchronize();
}

}  // namespace dt
