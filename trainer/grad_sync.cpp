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

GradClip grad_clip_factor_tp(Context& ctx, const ParamStore& params, Communicator& tp, double max_norm) {
  std::vector<Tensor> split, replicated;
  for (int s = 0; s < params.size(); ++s)
    (params.infos()[s].split == TpSplit::kReplicated ? replicated : split).push_back(params.grad(s));
  const double ss_split = split.empty() ? 0.0 : sum_squares(ctx, split);
  const double ss_repl = replicated.empty() ? 0.0 : sum_squares(ctx, replicated);
  return grad_clip_of_norm(std::sqrt(all_reduce_value(tp, ss_split, ReduceOp::kSum) + ss_repl), max_norm);
}

double clip_grad_norm_tp(Context& ctx, ParamStore& params, Communicator& tp, double max_norm) {
  const GradClip clip = grad_clip_factor_tp(ctx, params, tp, max_norm);
  if (clip.scale == 1.0) return clip.norm;
  std::vector<Tensor> all;
  for (int s = 0; s < params.size(); ++s) all.push_back(params.grad(s));
  scale_tensors(ctx, all, clip.scale);
  return clip.norm;
}

}  // namespace dt
