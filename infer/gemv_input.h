// How decode_gemv takes its input x [N, C] (infer/decode_ops.h): shared by the dispatch, the CPU
// reference (infer/cpu/decode_ref.h) and the GPU kernel (infer/cuda/decode_cuda.h).
//   kPlain    x' = x
//   kSwiGLU   x' = silu(x) x2                    (swiglu_forward)
//   kGate     x' = x sigmoid(x2)                 (sigmoid_gate_forward)
//   kRmsNorm  x' = x rsqrt(mean x^2 + eps) w'    (rmsnorm_forward: w' = 1 + w zero-centred, else w)
// On the GPU x' is rounded to bf16, as the unfused op rounds its output.
#pragma once

namespace dt {

enum class GemvInput : int { kPlain, kSwiGLU, kGate, kRmsNorm };

}  // namespace dt
