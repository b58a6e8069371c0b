#include "layers/linear.h"

#include "kernels/ops.h"
#include "layers/tp.h"

#include <algorithm>
#include <cmath>

namespace dt {

double residual_init_std(const ModelConfig& cfg) {
  return cfg.init_std / std::sqrt(2.0 * std::max(1, cfg.n_layers()));
}

Linear::Linear(std::string prefix, int64_t in, int64_t out, double init_std, TpSplit split, TpLayout tp)
    : name_(std::move(prefix) + ".weight"),
      in_(in),
      out_(out),
      full_in_(in),
      full_out_(out),
      init_std_(init_std),
      split_(split) {
  DT_CHECK(in > 0 && out > 0, "{}: features must be positive, got [{}, {}]", name_, out, in);
  if (split == TpSplit::kColumn) out_ = tp_local(out, tp, name_ + " output features");
  if (split == TpSplit::kRow) in_ = tp_local(in, tp, name_ + " input features");
}

void Linear::declare(ParamStore& params, Arena&, int, int) {
  params_ = &params;
  w_ = params.declare({name_, {full_out_, full_in_}, Init::kNormal, init_std_, split_, /*decay=*/true});
}

void Linear::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  x_ = x;
  linear_forward(ctx, y, x, params_->param(w_));
}

void Linear::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  linear_backward(ctx, dx, params_->grad(w_), dy, x_, params_->param(w_));
}

void Linear::backward_accumulate(Context& ctx, const Tensor& dy, const Tensor& dx) {
  linear_backward(ctx, dx, params_->grad(w_), dy, x_, params_->param(w_), 1.0, /*accumulate_dx=*/true);
}

}  // namespace dt
