// The one reduction the MPI backend uses, in a fixed order, so that every rank computes the same
// bits whatever MPI's algorithms are (parallel/communicator.h):
//
//   dst[i] = op(...op(op(src[0][i], src[1][i]), src[2][i])..., src[n-1][i])     (rank order)
//
// accumulated in fp32 for bf16 (rounded to bf16 once, at the end), in the tensor's own type for
// f32 and f64, with wrap-around for i32. kAvg divides the sum by n (in the accumulation type);
// kMax returns NaN when any input is NaN.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "parallel/communicator.h"

namespace dt {

// srcs: the n contributions in rank order, each `count` elements of `dtype`; dst may alias srcs[0].
void reduce_in_rank_order(DType dtype, ReduceOp op, std::span<const void* const> srcs, void* dst, int64_t count);

}  // namespace dt
