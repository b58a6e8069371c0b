// A GPU tensor for the GPU test suites: its own allocation, filled from host floats (rounded to
// bf16 for a bf16 tensor), read back as floats, poisoned with NaN.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/fill.h"

namespace dt {

// A GPU tensor in its own allocation, optionally `offset` elements past the (256-byte aligned)
// start so that vectorised paths are refused and the scalar fallback runs.
class Dev {
 public:
  Dev(DType dtype, Shape shape, int64_t offset = 0) {
    const size_t es = dtype_size(dtype);
    base_ = device_alloc(std::max<size_t>(1, static_cast<size_t>(shape.numel() + offset) * es), Device::kCUDA);
    t_ = Tensor(static_cast<char*>(base_) + offset * es, dtype, Device::kCUDA, shape);
  }
  ~Dev() { device_free(base_, Device::kCUDA); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;

  const Tensor& t() const { return t_; }
  operator const Tensor&() const { return t_; }

  void upload(const std::vector<float>& h) const {
    EXPECT_EQ(static_cast<int64_t>(h.size()), t_.numel());
    if (t_.dtype == DType::kBF16) {
      std::vector<uint16_t> b(h.size());
      for (size_t i = 0; i < h.size(); ++i) b[i] = f32_to_bf16(h[i]);
      device_copy(t_.data, Device::kCUDA, b.data(), Device::kCPU, b.size() * 2);
    } else {
      EXPECT_EQ(t_.dtype, DType::kF32);
      device_copy(t_.data, Device::kCUDA, h.data(), Device::kCPU, h.size() * 4);
    }
  }
  void set_i32(int32_t v) const { device_copy(t_.data, Device::kCUDA, &v, Device::kCPU, 4); }
  void upload_i32(const std::vector<int32_t>& h) const {
    device_copy(t_.data, Device::kCUDA, h.data(), Device::kCPU, h.size() * 4);
  }
  std::vector<uint8_t> raw() const {  // device_copy is a blocking cudaMemcpy: it waits for the kernels
    std::vector<uint8_t> r(t_.bytes());
    device_copy(r.data(), Device::kCPU, t_.data, Device::kCUDA, r.size());
    return r;
  }
  std::vector<int32_t> download_i32() const {
    std::vector<int32_t> h(static_cast<size_t>(t_.numel()));
    device_copy(h.data(), Device::kCPU, t_.data, Device::kCUDA, h.size() * 4);
    return h;
  }
  std::vector<float> download() const {
    const std::vector<uint8_t> r = raw();
    std::vector<float> f(t_.numel());
    if (t_.dtype == DType::kBF16) {
      for (size_t i = 0; i < f.size(); ++i) {
        uint16_t b;
        std::memcpy(&b, &r[2 * i], 2);
        f[i] = bf16_to_f32(b);
      }
    } else {
      std::memcpy(f.data(), r.data(), r.size());
    }
    return f;
  }
  void poison(Context& ctx) const { fill(ctx, t_, std::numeric_limits<double>::quiet_NaN()); }

 private:
  void* base_ = nullptr;
  Tensor t_;
};

inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

}  // namespace dt
