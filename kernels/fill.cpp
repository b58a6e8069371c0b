#include "kernels/fill.h"

#include <algorithm>

#include "core/fp8.h"

namespace dt {

void fill(Context& ctx, const Tensor& t, double value) {
  DT_CHECK(t.is_contiguous(), "fill: tensor {} must be contiguous", t.str());
  if (t.device == Device::kCUDA) {
#ifdef DELTATRON_HAVE_CUDA
    fill_cuda(t, value, ctx.stream);
    return;
#else
    DT_FAIL("fill: this build has no CUDA backend");
#endif
  }
  (void)ctx;
  int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32: std::fill_n(t.ptr<float>(), n, static_cast<float>(value)); return;
    case DType::kF64: std::fill_n(t.ptr<double>(), n, value); return;
    case DType::kBF16:
      std::fill_n(static_cast<uint16_t*>(t.data), n, f32_to_bf16(static_cast<float>(value)));
      return;
    case DType::kI32: std::fill_n(t.ptr<int32_t>(), n, static_cast<int32_t>(value)); return;
    case DType::kU16: std::fill_n(t.ptr<uint16_t>(), n, static_cast<uint16_t>(value)); return;
    case DType::kF8E4M3: std::fill_n(static_cast<uint8_t*>(t.data), n, f32_to_e4m3(static_cast<float>(value))); return;
  }
}

}  // namespace dt
