// kernels/ops.h: the one dispatch API for every op (DESIGN section 1).
//
// Each op takes a Context and Tensor views and dispatches on ctx.device and the
// tensors' dtype: on the CPU to the readable references in kernels/cpu/ (`*_ref`,
// templated on float and double), on the GPU (later) to kernels/cuda/.
//
// Conventions for every op here:
//   - Shapes are checked before any work; a mismatch is a dt::Error naming the op,
//     the argument and both shapes.
//   - Outputs are WRITTEN (=), except parameter gradients (dw, dweight, dbias, ...),
//     which are ACCUMULATED (+=).
//   - Linear weights use the Hugging Face layout [out_features, in_features]:
//     y = x W^T.
//   - Activations are row-major [..., features]; "rows" means the product of the
//     leading dimensions.
#pragma once

#include "core/context.h"
#include "core/tensor.h"

namespace dt {

// ============================================================================
// Dense ops: embedding, RMSNorm, linear, SwiGLU, RoPE, attention (GQA, MLA),
// LM head + cross-entropy. Implemented in kernels/ops_dense.cpp.
// ============================================================================
// (dense section begins)

// y[..., out] = x[..., in] w[out, in]^T
void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w);
// dx[..., in] = dy w (written; skipped when dx is undefined);
// dw[out, in] += dy^T x (accumulated; skipped when dw is undefined).
void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy,
                     const Tensor& x, const Tensor& w);

// (dense section ends)

// ============================================================================
// Gated DeltaNet core: causal depthwise conv + SiLU, l2norm, gates, the delta
// rule (recurrent and chunked), gated RMSNorm. Implemented in kernels/ops_gdn.cpp.
// ============================================================================
// (gdn section begins)

// (gdn section ends)

}  // namespace dt
