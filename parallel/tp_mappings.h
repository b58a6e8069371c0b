// Tensor-parallel region mappings, in forward/backward pairs (docs/parallel.md, "TP mappings"; Megatron
// tensor_parallel/mappings.py). `tp` is the rank's TP communicator (parallel/process_groups.h).
//
// Megatron's rule: a column-parallel linear, Y = X A with A split along its
// second dimension (Y_local = X A_local), is entered through copy_to_tp_region; a row-parallel
// linear, Z = Y B with B split along its first dimension (Z = sum over ranks of Y_local B_local),
// is left through reduce_from_tp_region. The pair costs one all-reduce forward, one backward.
//
//   mapping                 forward                               backward
//   copy_to_tp_region       identity                              dx = sum over TP of dx
//   reduce_from_tp_region   y = sum over TP of y                  identity
//   gather_from_tp_region   y = [x_local of rank 0 | rank 1 | ..] dx_local = own slice of dy
//   scatter_to_tp_region    x_local = own slice of x              dx = [dx_local of rank 0 | ..]
//
// Gather and scatter act on the last dimension: with n_local features per rank, rank r's slice is
// [..., r * n_local, (r + 1) * n_local). Outputs come first (as in kernels/ops.h); tensors are
// contiguous. The reductions and gathers are in place where they can be.
#pragma once

#include "core/tensor.h"
#include "parallel/communicator.h"

namespace dt {

// Forward: x goes into the region as is (every rank holds all of it). Nothing to do; kept so that
// layer code reads as the pair it is.
inline void copy_to_tp_region_forward(Communicator& /*tp*/, const Tensor& /*x*/) {}
// Backward: dx = sum over the TP group of dx (each rank's part of the gradient), in place.
void copy_to_tp_region_backward(Communicator& tp, const Tensor& dx);

// Forward: y = sum over the TP group of the ranks' partial y, in place.
void reduce_from_tp_region_forward(Communicator& tp, const Tensor& y);
// Backward: dy is already whole on every rank. Nothing to do.
inline void reduce_from_tp_region_backward(Communicator& /*tp*/, const Tensor& /*dy*/) {}

// Forward: y [..., size * n_local] = the ranks' x_local [..., n_local], side by side on the last dim.
void gather_from_tp_region_forward(Communicator& tp, const Tensor& y, const Tensor& x_local);
// Backward: dx_local [..., n_local] = this rank's slice of dy [..., size * n_local].
void gather_from_tp_region_backward(Communicator& tp, const Tensor& dx_local, const Tensor& dy);

// Forward: x_local [..., n_local] = this rank's slice of x [..., size * n_local].
void scatter_to_tp_region_forward(Communicator& tp, const Tensor& x_local, const Tensor& x);
// Backward: dx [..., size * n_local] = the ranks' dx_local, side by side on the last dim.
void scatter_to_tp_region_backward(Communicator& tp, const Tensor& dx, const Tensor& dx_local);

// rows x width bytes from src (rows src_pitch bytes apart) to dst (rows dst_pitch apart), both on
// `device` (synchronous on the GPU). The strided copy under gather and scatter; the vocab-parallel
// LM head uses it too.
void copy_strided_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, int64_t rows,
                       Device device);

}  // namespace dt
