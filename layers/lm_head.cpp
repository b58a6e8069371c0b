#include "layers/lm_head.h"

#include <vector>

#include "core/device.h"
#include "kernels/ops.h"
#include "layers/embedding.h"

namespace dt {

LMHead::LMHead(const ModelConfig& cfg)
    : vocab_(cfg.vocab_size), dim_(cfg.d_model), tied_(cfg.tie_embeddings), init_std_(cfg.init_std) {}

void LMHead::declare(ParamStore& params, Arena& acts, int B, int T) {
  params_ = &params;
  acts_ = &acts;
  if (tied_) {
    DT_CHECK(params.contains(Embedding::kWeightName),
             "lm_head: tie_embeddings is set but {} is not declared before the LM head", Embedding::kWeightName);
    w_ = params.slot(Embedding::kWeightName);
  } else {
    w_ = params.declare({kWeightName, {vocab_, dim_}, Init::kNormal, init_std_, TpSplit::kColumn, /*decay=*/true});
  }
  fused_ = params.device() == Device::kCUDA;
  logits_ = acts.declare("lm_head.logits", params.act_dtype(), {B, T, vocab_});
  if (!fused_) dlogits_ = acts.declare("lm_head.grad.logits", params.act_dtype(), {B, T, vocab_});
  lse_ = acts.declare("lm_head.lse", params.stat_dtype(), {B, T});
  losses_ = acts.declare("lm_head.losses", params.stat_dtype(), {B, T});
}

double LMHead::forward(Context& ctx, const Tensor& x, const Tensor& targets) {
  x_ = x;
  targets_ = targets;
  Tensor logits = acts_->get(logits_), losses = acts_->get(losses_);
  linear_forward(ctx, logits, x, params_->param(w_));
  if (fused_)
    cross_entropy_fused(ctx, losses, acts_->get(lse_), logits, targets, 1.0 / static_cast<double>(targets.numel()));
  else
    cross_entropy_forward(ctx, losses, acts_->get(lse_), logits, targets);
  // The mean, summed in double on the host.
  const int64_t n = losses.numel();
  std::vector<double> host(n);
  if (losses.dtype == DType::kF64) {
    device_copy(host.data(), Device::kCPU, losses.data, losses.device, n * sizeof(double));
  } else {
    std::vector<float> f(n);
    device_copy(f.data(), Device::kCPU, losses.data, losses.device, n * sizeof(float));
    host.assign(f.begin(), f.end());
  }
  double sum = 0;
  for (double l : host) sum += l;
  return n ? sum / static_cast<double>(n) : 0.0;
}

void LMHead::backward(Context& ctx, double loss_scale, const Tensor& dx) {
  if (fused_) {  // the forward left dlogits / N in the logits buffer
    linear_backward(ctx, dx, params_->grad(w_), acts_->get(logits_), x_, params_->param(w_), loss_scale);
    return;
  }
  Tensor logits = acts_->get(logits_), dlogits = acts_->get(dlogits_);
  const double grad_scale = loss_scale / static_cast<double>(targets_.numel());
  cross_entropy_backward(ctx, dlogits, logits, acts_->get(lse_), targets_, grad_scale);
  linear_backward(ctx, dx, params_->grad(w_), dlogits, x_, params_->param(w_));
}

Tensor LMHead::logits() const {
  DT_CHECK(!fused_, "lm_head: the logits are not kept on the GPU (the fused cross-entropy overwrites them with "
           "their gradient); run on the CPU to read them");
  return acts_->get(logits_);
}

}  // namespace dt
