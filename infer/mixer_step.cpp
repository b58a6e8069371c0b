#include "infer/mixer_step.h"

#include "core/error.h"

namespace dt {

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
