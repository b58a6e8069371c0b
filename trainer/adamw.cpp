#include "trainer/adamw.h"

#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace dt {

AdamW::AdamW(ParamStore& params, AdamWConfig cfg) : params_(params), cfg_(cfg), state_("optimizer", params.device()) {
  for (const ParamInfo& info : params.infos()) {
    state_.declare("m/" + info.name, params.dtype(), info.shape);
    state_.declare("v/" + info.name, params.dtype(), info.shape);
  }
  state_.allocate();  // zeroed: m = v = 0 before the first step
}

void AdamW::step(double lr) {
  Context ctx;
  step(ctx, lr);
}

void AdamW::step(Context& ctx, double lr) {
  DT_CHECK(ctx.device == params_.device(), "AdamW: the context's device differs from the parameters'");
  ++t_;
  // The scalars in double, as PyTorch computes them in Python.
  double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t_));
  double bc2_sqrt = std::sqrt(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  double step_size = lr / bc1;
  std::vector<AdamWTensor> ts;
  ts.reserve(params_.size());
  for (int s = 0; s < params_.size(); ++s) {
    const ParamInfo& info = params_.infos()[s];
    ts.push_back({params_.master(s), params_.grad(s), m(s), v(s), params_.compute_copy(s),
                  info.decay ? 1.0 - lr * cfg_.weight_decay : 1.0});
  }
  adamw_update(ctx, ts, cfg_.beta1, cfg_.beta2, step_size, bc2_sqrt, cfg_.eps);
}

namespace {

std::vector<Tensor> all_grads(const ParamStore& params) {
  std::vector<Tensor> gs;
  for (int i = 0; i < params.size(); ++i) gs.push_back(params.grad(i));
  return gs;
}

Context context_of(const ParamStore& params) {
  Context ctx;
  ctx.device = params.device();
  return ctx;
}

}  // namespace

double grad_global_norm(Context& ctx, const ParamStore& params) {
  return std::sqrt(sum_squares(ctx, all_grads(params)));
}

double grad_global_norm(const ParamStore& params) {
  Context ctx = context_of(params);
  return grad_global_norm(ctx, params);
}

double clip_grad_norm(Context& ctx, ParamStore& params, double max_norm) {
  double norm = grad_global_norm(ctx, params);
  if (max_norm <= 0) return norm;
  double factor = max_norm / (norm + 1e-6);
  if (!(factor < 1.0)) return norm;  // also leaves NaN norms to the caller
  scale_tensors(ctx, all_grads(params), factor);
  return norm;
}

double clip_grad_norm(ParamStore& params, double max_norm) {
  Context ctx = context_of(params);
  return clip_grad_norm(ctx, params, max_norm);
}

}  // namespace dt
