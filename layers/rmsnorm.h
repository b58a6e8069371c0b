// RMSNorm layer over the last `dim` features: y = x / sqrt(mean(x^2) + eps) * w, or * (1 + w)
// when zero-centred (Qwen3.5; w starts at 0). Plain norms start at w = 1.
// Parameter: `<prefix>.weight` [dim], replicated under TP, no weight decay.
// `heads` > 1 normalises each of the heads of a [B, T, heads, dim] tensor on its own
// (Qwen3.5's q_norm / k_norm, one weight shared by the heads).
#pragma once

#include <string>

#include "layers/layer.h"

namespace dt {

class RMSNorm : public Layer {
 public:
  // tp_partial_grad: the norm sees only this TP rank's heads (q_norm, k_norm), so its gradient is
  // summed over TP before the update (ParamInfo::tp_partial_grad).
  RMSNorm(std::string prefix, int64_t dim, double eps, bool zero_centered, int64_t heads = 1,
          bool tp_partial_grad = false);

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;
  // dx = residual + (dy through the norm), in one kernel: a pre-norm block's skip gradient added
  // without a separate pass (rmsnorm_backward's residual; dx may alias residual).
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx, const Tensor& residual);

  const std::string& name() const { return name_; }

 private:
  Tensor rows(const Tensor& t) const;

  std::string prefix_, name_;
  int64_t dim_, heads_;
  double eps_;
  bool zero_centered_, tp_partial_grad_;
  ParamStore* params_ = nullptr;
  Arena* acts_ = nullptr;
  int w_ = -1, rstd_ = -1;
  Tensor x_;
};

}  // namespace dt
