#include "layers/block.h"

#include <fmt/format.h>

#include "kernels/ops.h"
#include "layers/attention.h"
#include "layers/gdn.h"
#include "layers/mla.h"

namespace dt {

std::unique_ptr<Layer> make_mixer(const ModelConfig& cfg, int index, TpLayout tp) {
  DT_CHECK(index >= 0 && index < cfg.n_layers(), "make_mixer: layer {} out of range (the model has {})", index,
           cfg.n_layers());
  const std::string prefix = fmt::format("model.layers.{}", index);
  switch (cfg.layers[index]) {
    case MixerKind::kAttn: return std::make_unique<Attention>(cfg, prefix + ".self_attn", tp);
    case MixerKind::kMla: return std::make_unique<MLA>(cfg, prefix + ".self_attn", tp);
    case MixerKind::kGdn: return std::make_unique<GatedDeltaNet>(cfg, prefix + ".linear_attn", tp);
  }
  DT_FAIL("layer {}: unknown mixer kind", index);
}

Block::Block(const ModelConfig& cfg, int index, TpLayout tp)
    : prefix_(fmt::format("model.layers.{}", index)),
      kind_(cfg.layers.at(index)),
      d_model_(cfg.d_model),
      input_layernorm_(prefix_ + ".input_layernorm", cfg.d_model, cfg.norm_eps, cfg.zero_centered_norm),
      post_attention_layernorm_(prefix_ + ".post_attention_layernorm", cfg.d_model, cfg.norm_eps,
                                cfg.zero_centered_norm),
      mixer_(make_mixer(cfg, index, tp)),
      mlp_(cfg, prefix_ + ".mlp", tp) {}

void Block::declare(ParamStore& params, Arena& acts, int B, int T) {
  acts_ = &acts;
  // Parameters in HF's order: mixer, mlp, then the two norms.
  mixer_->declare(params, acts, B, T);
  mlp_.declare(params, acts, B, T);
  input_layernorm_.declare(params, acts, B, T);
  post_attention_layernorm_.declare(params, acts, B, T);
  const int64_t C = d_model_;
  const DType dt = params.act_dtype();
  auto decl = [&](const char* name) { return acts.declare(prefix_ + "." + name, dt, {B, T, C}); };
  n1_ = decl("normed_x");
  m_ = decl("mixer_out");
  h_ = decl("h");
  n2_ = decl("normed_h");
  f_ = decl("mlp_out");
  // Backward temporaries, shared by every block.
  auto shared = [&](const char* name) { return acts.declare_shared(std::string("scratch.block.") + name, dt, {B, T, C}); };
  g0_ = shared("grad.0");
  g1_ = shared("grad.1");
}

void Block::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  Tensor n1 = buf(n1_), m = buf(m_), h = buf(h_), n2 = buf(n2_), f = buf(f_);
  input_layernorm_.forward(ctx, x, n1);
  mixer_->forward(ctx, n1, m);
  residual_add(ctx, h, x, m);
  post_attention_layernorm_.forward(ctx, h, n2);
  mlp_.forward(ctx, n2, f);
  residual_add(ctx, y, h, f);
}

void Block::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  // The skip connections' gradients are added inside the norms' backward (their residual argument).
  Tensor g0 = buf(g0_), g1 = buf(g1_);
  mlp_.backward(ctx, dy, g0);                           // g0 = d normed_h
  post_attention_layernorm_.backward(ctx, g0, g1, dy);  // g1 = d h = dy + (g0 through the norm)
  mixer_->backward(ctx, g1, g0);                        // g0 = d normed_x
  input_layernorm_.backward(ctx, g0, dx, g1);           // dx = g1 + (g0 through the norm)
}

}  // namespace dt
