#include "infer/mixer_step.h"

#include "core/error.h"
#include "kernels/ops.h"

namespace dt {

const Tensor& StepIO::normalize(Context& ctx) const {
  rmsnorm_forward(ctx, normed, rstd, h, norm_w, eps, zero_centered);
  return normed;
}

void StepIO::project_out(Context& ctx, const Tensor& w, const Tensor& x) const {
  const int64_t N = h.size(0), C = h.size(1), K = x.numel() / N;
  if (decode_gemv_supported(ctx.device, N, K)) {
    decode_gemv(ctx, {GemvOut(w, y, h).settled()}, x.view({N, K}), l2_after(w));
    return;
  }
  linear_forward(ctx, out.view({N, 1, C}), x.view({N, 1, K}), w);
  residual_add(ctx, y, h, out);
}

const std::vector<Tensor>& StepIO::l2_after(const Tensor& w) const { return l2 ? l2->after(w) : L2Plan::none(); }

std::unique_ptr<MixerStep> make_mixer_step(const MixerStepEnv& env) {
  DT_CHECK(env.layer >= 0 && env.layer < env.cfg.n_layers(), "decode: layer {} out of range (the model has {})",
           env.layer, env.cfg.n_layers());
  switch (env.cfg.layers[env.layer]) {
    case MixerKind::kGdn: return make_gdn_step(env);
    case MixerKind::kAttn: return make_attn_step(env);
    case MixerKind::kMla: return make_mla_step(env);
  }
  DT_FAIL("decode: layer {} has an unknown mixer kind", env.layer);
}

}  // namespace dt
