// Tensor parallelism inside the layers (DESIGN section 3, STYLE section 9): each layer is built for
// a TpLayout (its local head counts size its buffers) and reaches its TP group through Context::tp.
// The two mappings every sharded layer uses, as no-ops at tp = 1 (so a single process runs exactly
// the code it ran before TP):
//   entering column-parallel projections   copy_to_tp_region:     identity / dx summed over TP
//   leaving a row-parallel projection      reduce_from_tp_region: y summed over TP / identity
#pragma once

#include "core/context.h"
#include "core/error.h"
#include "layers/params.h"
#include "parallel/communicator.h"
#include "parallel/tp_mappings.h"

namespace dt {

// The TP communicator of ctx, checked against the layout the layer `who` was built for.
inline Communicator& tp_group(const Context& ctx, const TpLayout& tp, const std::string& who) {
  DT_CHECK(ctx.tp && ctx.tp->size() == tp.size && ctx.tp->rank() == tp.rank,
           "{}: built for tensor-parallel rank {} of {}, but the context's TP group is {}; set Context::tp to the "
           "rank's TP communicator (parallel/process_groups.h)",
           who, tp.rank, tp.size,
           ctx.tp ? fmt::format("rank {} of {}", ctx.tp->rank(), ctx.tp->size()) : std::string("missing"));
  return *ctx.tp;
}

// Forward of reduce_from_tp_region after a row-parallel projection: y = sum over TP of partial y.
inline void tp_reduce_output(Context& ctx, const TpLayout& tp, const Tensor& y, const std::string& who) {
  if (tp.size > 1) reduce_from_tp_region_forward(tp_group(ctx, tp, who), y);
}

// Backward of copy_to_tp_region before column-parallel projections: dx = sum over TP of partial dx.
inline void tp_reduce_input_grad(Context& ctx, const TpLayout& tp, const Tensor& dx, const std::string& who) {
  if (tp.size > 1) copy_to_tp_region_backward(tp_group(ctx, tp, who), dx);
}

// n / tp.size, with a clear error when it does not divide (the config check should have caught it).
inline int64_t tp_local(int64_t n, const TpLayout& tp, const std::string& what) {
  DT_CHECK(n % tp.size == 0, "{} = {} does not divide by the tensor-parallel size {}; choose sizes that divide by "
           "parallel.tp", what, n, tp.size);
  return n / tp.size;
}

}  // namespace dt
