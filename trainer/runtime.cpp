#include "trainer/runtime.h"

#include <fmt/format.h>

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
  if (device == Device::kCUDA) return fmt::format("device: cuda:0 ({}), bf16 mixed precision", cuda_device_name(0));
  if (setting == "auto")
    return fmt::format("device: cpu, fp32 ({})", cuda_built() ? "no GPU is visible" : "this build has no CUDA backend");
  return "device: cpu, fp32";
}

Runtime::Runtime(Device device) {
  ctx_.device = device;
  if (device == Device::kCPU) return;
#ifdef DELTATRON_HAVE_CUDA
  std::shared_ptr<CudaContextOwner> owner = make_cuda_context(/*device_index=*/0);
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
