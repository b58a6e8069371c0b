#include "layers/params.h"

#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "kernels/ops.h"

namespace dt {

ParamStore::ParamStore(DType dtype, Device device)
    : dtype_(dtype),
      device_(device),
      params_("params", device),
      grads_("grads", device),
      compute_("params_bf16", device) {
  DT_CHECK(dtype == DType::kF32 || dtype == DType::kF64, "parameters must be f32 or f64, got {}",
           dtype_name(dtype));
  DT_CHECK(device == Device::kCPU || dtype == DType::kF32,
           "parameters on the GPU are fp32 masters (with bf16 copies), got {}", dtype_name(dtype));
}

int ParamStore::declare(ParamInfo info) {
  int slot = params_.declare(info.name, dtype_, info.shape);
  grads_.declare(info.name, dtype_, info.shape);
  const bool bf16_copy = device_ == Device::kCUDA && info.shape.ndim == 2;
  compute_slot_.push_back(bf16_copy ? compute_.declare(info.name, DType::kBF16, info.shape) : -1);
  infos_.push_back(std::move(info));
  return slot;
}

void ParamStore::allocate() {
  params_.allocate();
  grads_.allocate();
  compute_.allocate();
}

void ParamStore::sync_compute() {
  if (device_ != Device::kCUDA) return;
  Context ctx;
  ctx.device = Device::kCUDA;  // the legacy default stream, then a device-wide sync
  for (int s = 0; s < size(); ++s)
    if (compute_slot_[s] >= 0) cast(ctx, compute_.get(compute_slot_[s]), params_.get(s));
  device_synchronize();
}

int64_t ParamStore::numel() const {
  int64_t n = 0;
  for (const ParamInfo& p : infos_) n += p.shape.numel();
  return n;
}

void ParamStore::zero_grads() { grads_.zero(); }

namespace {

double init_value(const ParamInfo& p, uint64_t seed, uint64_t stream, uint64_t i) {
  switch (p.init) {
    case Init::kNormal: return p.std * philox_normal(seed, stream, i);
    case Init::kZeros: return 0.0;
    case Init::kOnes: return 1.0;
    case Init::kALog: return std::log(1.0 + 15.0 * philox_uniform(seed, stream, i));
    case Init::kDtBias: {
      double u = philox_uniform(seed, stream, i);
      double dt = std::exp(std::log(1e-3) + u * (std::log(0.1) - std::log(1e-3)));
      return dt + std::log(-std::expm1(-dt));  // softplus^-1(dt)
    }
  }
  DT_FAIL("unknown init for {}", p.name);
}

}  // namespace

void ParamStore::init(uint64_t seed) {
  for (int s = 0; s < size(); ++s) {
    const ParamInfo& p = infos_[s];
    uint64_t stream = philox_stream_of(p.name.c_str());
    int64_t n = p.shape.numel();
    Tensor t = master(s);
    std::vector<double> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = init_value(p, seed, stream, static_cast<uint64_t>(i));
    if (dtype_ == DType::kF64) {
      device_copy(t.data, device_, host.data(), Device::kCPU, n * sizeof(double));
    } else {
      std::vector<float> f(host.begin(), host.end());
      device_copy(t.data, device_, f.data(), Device::kCPU, n * sizeof(float));
    }
  }
  sync_compute();
}

}  // namespace dt
