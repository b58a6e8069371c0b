#include "parallel/reduce_order.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace dt {

namespace {

template <class Acc>
Acc combine(ReduceOp op, Acc a, Acc b) {
  if (op == ReduceOp::kMax) {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<Acc>::quiet_NaN();
    }
    return b > a ? b : a;
  }
  if constexpr (std::is_same_v<Acc, int32_t>) {
    // Two's-complement wrap-around (as NCCL), without signed-overflow UB.
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  } else {
    return a + b;
  }
}

// Storage type T, accumulation type Acc; `load`/`store` convert (bf16 <-> fp32, else plain casts).
// Blocked over elements so that acc stays in cache while the ranks' contributions stream through.
template <class T, class Acc, class Load, class Store>
void reduce_typed(ReduceOp op, std::span<const void* const> srcs, void* dst, int64_t count, Load load, Store store) {
  constexpr int64_t kBlock = 2048;
  Acc acc[kBlock];
  const int n = static_cast<int>(srcs.size());
  for (int64_t b0 = 0; b0 < count; b0 += kBlock) {
    const int64_t len = std::min(kBlock, count - b0);
    const T* s0 = static_cast<const T*>(srcs[0]) + b0;
    for (int64_t i = 0; i < len; ++i) acc[i] = load(s0[i]);
    for (int r = 1; r < n; ++r) {
      const T* s = static_cast<const T*>(srcs[r]) + b0;
      for (int64_t i = 0; i < len; ++i) acc[i] = combine<Acc>(op, acc[i], load(s[i]));
    }
    if (op == ReduceOp::kAvg) {
      if constexpr (std::is_floating_point_v<Acc>) {
        for (int64_t i = 0; i < len; ++i) acc[i] = acc[i] / static_cast<Acc>(n);
      }
    }
    T* d = static_cast<T*>(dst) + b0;
    for (int64_t i = 0; i < len; ++i) d[i] = store(acc[i]);
  }
}

}  // namespace

void reduce_in_rank_order(DType dtype, ReduceOp op, std::span<const void* const> srcs, void* dst, int64_t count) {
  DT_ASSERT(!srcs.empty() && count >= 0);
  DT_CHECK(!(op == ReduceOp::kAvg && dtype == DType::kI32), "reduce avg needs a floating-point tensor, got i32");
  auto same = [](auto x) { return x; };
  switch (dtype) {
    case DType::kF32: reduce_typed<float, float>(op, srcs, dst, count, same, same); return;
    case DType::kF64: reduce_typed<double, double>(op, srcs, dst, count, same, same); return;
    case DType::kI32: reduce_typed<int32_t, int32_t>(op, srcs, dst, count, same, same); return;
    case DType::kBF16:
      reduce_typed<uint16_t, float>(op, srcs, dst, count, [](uint16_t h) { return bf16_to_f32(h); },
                                    [](float f) { return f32_to_bf16(f); });
      return;
    case DType::kU16:
    case DType::kF8E4M3: break;
  }
  DT_FAIL("reduce of a {} tensor: collectives take f32, f64, bf16 or i32", dtype_name(dtype));
}

}  // namespace dt
