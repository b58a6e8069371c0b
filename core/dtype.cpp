#include "core/dtype.h"

#include "core/error.h"

namespace dt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kU16: return 2;
    case DType::kF8E4M3: return 1;
  }
  DT_FAIL("unknown dtype {}", static_cast<int>(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kU16: return "u16";
    case DType::kF8E4M3: return "f8e4m3";
  }
  return "?";
}

}  // namespace dt
