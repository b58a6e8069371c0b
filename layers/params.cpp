#include "layers/params.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "kernels/ops.h"

namespace dt {

ParamStore::ParamStore(DType dtype, Device device, TpLayout tp)
    : dtype_(dtype),
      device_(device),
      tp_(tp),
      params_("params", device),
      grads_("grads", device),
      compute_("params_bf16", device) {
  DT_CHECK(dtype == DType::kF32 || dtype == DType::kF64, "parameters must be f32 or f64, got {}",
           dtype_name(dtype));
  DT_CHECK(device == Device::kCPU || dtype == DType::kF32,
           "parameters on the GPU are fp32 masters (with bf16 copies), got {}", dtype_name(dtype));
  DT_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size, "tensor-parallel rank {} outside a group of {}",
           tp.rank, tp.size);
}

namespace {

// The dimension a split cuts, or -1.
int split_dim(const ParamInfo& p) {
  if (p.split == TpSplit::kColumn) return 0;
  if (p.split == TpSplit::kRow) return 1;
  return -1;
}

// The blocks along the split dimension (full sizes), checked against the shape and the TP size.
std::vector<int64_t> split_blocks(const ParamInfo& p, const Shape& full, int tp_size) {
  const int d = split_dim(p);
  DT_CHECK(d < full.ndim, "parameter {}: a {} split needs at least {} dimensions, its shape is {}", p.name,
           d == 0 ? "column" : "row", d + 1, full.str());
  std::vector<int64_t> blocks = p.tp_blocks.empty() ? std::vector<int64_t>{full[d]} : p.tp_blocks;
  int64_t sum = 0;
  for (int64_t b : blocks) {
    DT_CHECK(b % tp_size == 0,
             "parameter {} {}: dimension {} (block of {}) does not divide by the tensor-parallel size {}; choose "
             "head counts and sizes that divide by parallel.tp",
             p.name, full.str(), d, b, tp_size);
    sum += b;
  }
  DT_CHECK(sum == full[d], "parameter {}: its TP blocks sum to {}, not to dimension {} = {}", p.name, sum, d, full[d]);
  return blocks;
}

}  // namespace

void tp_copy_part(const ParamInfo& p, const TpLayout& tp, void* full, void* part, size_t elem_bytes, bool to_part) {
  const Shape& fs = p.full_shape.ndim ? p.full_shape : p.shape;
  const int d = split_dim(p);
  if (d < 0 || tp.size == 1) {
    const size_t bytes = static_cast<size_t>(fs.numel()) * elem_bytes;
    if (to_part) std::memcpy(part, full, bytes); else std::memcpy(full, part, bytes);
    return;
  }
  const std::vector<int64_t> blocks = split_blocks(p, fs, tp.size);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= fs[i];
  for (int i = d + 1; i < fs.ndim; ++i) inner *= fs[i];
  const int64_t D = fs[d], Dl = D / tp.size;
  char* f = static_cast<char*>(full);
  char* q = static_cast<char*>(part);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t full_off = 0, part_off = 0;
    for (int64_t b : blocks) {
      const int64_t len = b / tp.size;  // rank r takes [r len, (r+1) len) of every block
      char* fp = f + ((o * D + full_off + tp.rank * len) * inner) * elem_bytes;
      char* pp = q + ((o * Dl + part_off) * inner) * elem_bytes;
      const size_t bytes = static_cast<size_t>(len * inner) * elem_bytes;
      if (to_part) std::memcpy(pp, fp, bytes); else std::memcpy(fp, pp, bytes);
      full_off += b;
      part_off += len;
    }
  }
}

int ParamStore::declare(ParamInfo info) {
  info.full_shape = info.shape;
  if (const int d = split_dim(info); d >= 0 && tp_.size > 1) {
    split_blocks(info, info.shape, tp_.size);  // checks that every block divides
    info.shape.dims[d] /= tp_.size;
  }
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
    if (n == p.full_shape.numel()) {
      for (int64_t i = 0; i < n; ++i) host[i] = init_value(p, seed, stream, static_cast<uint64_t>(i));
    } else {  // this rank's part of the whole tensor's values, so that any TP size starts from the same model
      std::vector<double> whole(p.full_shape.numel());
      for (size_t i = 0; i < whole.size(); ++i) whole[i] = init_value(p, seed, stream, static_cast<uint64_t>(i));
      tp_copy_part(p, tp_, whole.data(), host.data(), sizeof(double), /*to_part=*/true);
    }
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
