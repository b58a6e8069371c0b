// The (value, index) pair merge of the GPU argmax (greedy decoding: decode_argmax's kernel and the
// LM head's GEMV with the argmax): keeps the larger value and, on a tie, the smaller index; an index
// below 0 is "none yet". NaN never enters (the callers skip it), so the merge is associative and
// commutative and any order of merges gives the first index of the largest value.
#pragma once

#include <cuda_runtime.h>

namespace dt::cuda {

__device__ __forceinline__ void argmax_merge(float& v, int& i, float v2, int i2) {
  if (i2 >= 0 && (i < 0 || v2 > v || (v2 == v && i2 < i))) v = v2, i = i2;
}

// The merge of every lane's pair into lane 0's (a butterfly down the warp).
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int off = 16; off > 0; off >>= 1)
    argmax_merge(v, i, __shfl_down_sync(0xffffffffu, v, off), __shfl_down_sync(0xffffffffu, i, off));
}

}  // namespace dt::cuda
