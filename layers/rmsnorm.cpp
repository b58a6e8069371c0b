#include "layers/rmsnorm.h"

#include "kernels/ops.h"

namespace dt {

RMSNorm::RMSNorm(std::string prefix, int64_t dim, double eps, bool zero_centered, int64_t heads,
                 bool tp_partial_grad)
    : prefix_(std::move(prefix)), name_(prefix_ + ".weight"), dim_(dim), heads_(heads), eps_(eps),
      zero_centered_(zero_centered), tp_partial_grad_(tp_partial_grad) {
  DT_CHECK(dim > 0 && heads > 0, "{}: dim {} and heads {} must be positive", name_, dim, heads);
  DT_CHECK(eps > 0, "{}: eps must be positive, got {}", name_, eps);
}

void RMSNorm::declare(ParamStore& params, Arena& acts, int B, int T) {
  params_ = &params;
  acts_ = &acts;
  ParamInfo info{name_, {dim_}, zero_centered_ ? Init::kZeros : Init::kOnes, 0.0, TpSplit::kReplicated,
                 /*decay=*/false};
  info.tp_partial_grad = tp_partial_grad_;
  w_ = params.declare(std::move(info));
  rstd_ = acts.declare(prefix_ + ".rstd", params.stat_dtype(), {int64_t{B} * T * heads_});
}

// Tensors are seen as [rows, dim], so [B, T, heads * dim] and [B, T, heads, dim] both work.
Tensor RMSNorm::rows(const Tensor& t) const {
  DT_CHECK(t.numel() % dim_ == 0, "{}: tensor {} is not a multiple of the norm dim {}", name_, t.shape.str(), dim_);
  return t.view({t.numel() / dim_, dim_});
}

void RMSNorm::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  x_ = x;
  rmsnorm_forward(ctx, rows(y), acts_->get(rstd_), rows(x), params_->param(w_), eps_, zero_centered_);
}

void RMSNorm::backward(Context& ctx, const Tensor& dy, const Tensor& dx) { backward(ctx, dy, dx, Tensor()); }

void RMSNorm::backward(Context& ctx, const Tensor& dy, const Tensor& dx, const Tensor& residual) {
  rmsnorm_backward(ctx, rows(dx), params_->grad(w_), rows(dy), rows(x_), params_->param(w_), acts_->get(rstd_),
                   zero_centered_, residual.defined() ? rows(residual) : Tensor());
}

}  // namespace dt
