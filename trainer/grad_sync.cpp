#include "trainer/grad_sync.h"

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "parallel/dp_grads.h"

namespace dt {

void tp_sum_partial_grads(Communicator& tp, ParamStore& params, int first, int end) {
  for (int s = first; s < end; ++s)
    if (params.infos()[s].tp_partial_grad) tp.all_reduce_async(params.grad(s), ReduceOp::kSum)->wait();
}

double clip_grad_norm_tp(Context& ctx, ParamStore& params, Communicator& tp, double max_norm) {
  std::vector<Tensor> split, replicated, all;
  for (int s = 0; s < params.size(); ++s) {
    (params.infos()[s].split == TpSplit::kReplicated ? replicated : split).push_back(params.grad(s));
    all.push_back(params.grad(s));
  }
  const double ss_split = split.empty() ? 0.0 : sum_squares(ctx, split);
  const double ss_repl = replicated.empty() ? 0.0 : sum_squares(ctx, replicated);
  const double norm = std::sqrt(all_reduce_value(tp, ss_split, ReduceOp::kSum) + ss_repl);
  if (max_norm <= 0) return norm;
  const double factor = max_norm / (norm + 1e-6);
  if (!(factor < 1.0)) return norm;  // also leaves NaN norms to the caller
  scale_tensors(ctx, all, factor);
  return norm;
}

}  // namespace dt
