#include "layers/model.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/device.h"
#include "kernels/ops.h"

namespace dt {

namespace {

const ModelConfig& checked(const ModelConfig& cfg, int B, int T) {
  DT_CHECK(B > 0 && T > 0, "model: batch size ({}) and sequence length ({}) must be positive", B, T);
  DT_CHECK(cfg.n_layers() > 0, "model: the layer pattern is empty; give model.layers at least one layer");
  DT_CHECK(cfg.vocab_size > 0 && cfg.d_model > 0 && cfg.d_ff > 0,
           "model: vocab_size ({}), d_model ({}) and d_ff ({}) must be positive", cfg.vocab_size, cfg.d_model,
           cfg.d_ff);
  return cfg;
}

}  // namespace

Model::Model(const ModelConfig& cfg, int B, int T, DType dtype, Device device, TpLayout tp)
    : Model(cfg, B, T, dtype, device, tp, /*allocate=*/true) {}

Model::Model(const ModelConfig& cfg, int B, int T, DType dtype, Device device, TpLayout tp, bool allocate)
    : cfg_(checked(cfg, B, T)),
      B_(B),
      T_(T),
      params_(dtype, device, tp),
      acts_("activations", device),
      embed_(cfg_, tp),
      norm_("model.norm", cfg_.d_model, cfg_.norm_eps, cfg_.zero_centered_norm),
      lm_head_(cfg_, tp) {
  for (int i = 0; i < cfg_.n_layers(); ++i) blocks_.push_back(std::make_unique<Block>(cfg_, i, tp));
  // Declaration order is Hugging Face's parameter order.
  embed_slots_.first = params_.size();
  embed_.declare(params_);
  embed_slots_.second = params_.size();
  for (auto& b : blocks_) {
    const int first = params_.size();
    b->declare(params_, acts_, B, T);
    block_slots_.emplace_back(first, params_.size());
  }
  norm_slots_.first = params_.size();
  norm_.declare(params_, acts_, B, T);
  norm_slots_.second = head_slots_.first = params_.size();
  lm_head_.declare(params_, acts_, B, T);  // tied: declares nothing (it accumulates into the embedding's)
  head_slots_.second = params_.size();

  const int64_t C = cfg_.d_model;
  ids_ = acts_.declare("model.input_ids", DType::kI32, {B, T});
  targets_ = acts_.declare("model.target_ids", DType::kI32, {B, T});
  const DType act = params_.act_dtype();
  for (int i = 0; i <= cfg_.n_layers(); ++i)
    hs_.push_back(acts_.declare(fmt::format("model.residual.{}", i), act, {B, T, C}));
  hn_ = acts_.declare("model.norm.out", act, {B, T, C});
  grad_a_ = acts_.declare("model.grad.residual_a", act, {B, T, C});
  grad_b_ = acts_.declare("model.grad.residual_b", act, {B, T, C});

  if (!allocate) return;
  params_.allocate();
  acts_.allocate();
}

std::vector<ParamInfo> Model::param_infos(const ModelConfig& cfg) {
  const Model shape_only(cfg, 1, 1, DType::kF32, Device::kCPU, TpLayout{}, /*allocate=*/false);
  return shape_only.params().infos();
}

double Model::forward(Context& ctx, const int32_t* inputs, const int32_t* targets) {
  DT_CHECK(ctx.device == params_.device(), "model: the context's device differs from the model's");
  Tensor ids = acts_.get(ids_), tgt = acts_.get(targets_);
  device_copy(ids.data, ids.device, inputs, Device::kCPU, ids.bytes());
  device_copy(tgt.data, tgt.device, targets, Device::kCPU, tgt.bytes());
  embed_.forward(ctx, ids, acts_.get(hs_[0]));
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->forward(ctx, acts_.get(hs_[i]), acts_.get(hs_[i + 1]));
  Tensor hn = acts_.get(hn_);
  norm_.forward(ctx, acts_.get(hs_.back()), hn);
  double loss = lm_head_.forward(ctx, hn, tgt);
  have_forward_ = true;
  return loss;
}

Tensor Model::forward_hidden(Context& ctx, const int32_t* inputs) {
  DT_CHECK(ctx.device == params_.device(), "model: the context's device differs from the model's");
  Tensor ids = acts_.get(ids_);
  device_copy(ids.data, ids.device, inputs, Device::kCPU, ids.bytes());
  embed_.forward(ctx, ids, acts_.get(hs_[0]));
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->forward(ctx, acts_.get(hs_[i]), acts_.get(hs_[i + 1]));
  Tensor hn = acts_.get(hn_);
  norm_.forward(ctx, acts_.get(hs_.back()), hn);
  have_forward_ = false;  // the LM head has not run: nothing to differentiate
  return hn;
}

void Model::backward(Context& ctx, double loss_scale, const GradsReady& grads_ready) {
  DT_CHECK(have_forward_, "model: backward() needs a forward() first");
  auto ready = [&](std::pair<int, int> slots) {
    if (grads_ready && slots.first < slots.second) grads_ready(slots.first, slots.second);
  };
  Tensor ga = acts_.get(grad_a_), gb = acts_.get(grad_b_);
  lm_head_.backward(ctx, loss_scale, ga);  // ga = d hn
  ready(head_slots_);
  norm_.backward(ctx, ga, gb);             // gb = d h_L
  ready(norm_slots_);
  for (size_t i = blocks_.size(); i-- > 0;) {
    blocks_[i]->backward(ctx, gb, ga);
    ready(block_slots_[i]);
    std::swap(ga, gb);  // gb = d h_i
  }
  embed_.backward(ctx, gb);
  ready(embed_slots_);
}

std::string Model::summary() const {
  std::string pattern;
  for (MixerKind k : cfg_.layers) pattern += fmt::format("{}{}", pattern.empty() ? "" : ", ", mixer_name(k));
  auto has = [&](MixerKind k) { return std::find(cfg_.layers.begin(), cfg_.layers.end(), k) != cfg_.layers.end(); };
  std::string s = fmt::format("model: {} layers [{}], d_model {}, d_ff {}, vocab {}, {} embeddings, {} norms\n",
                              cfg_.n_layers(), pattern, cfg_.d_model, cfg_.d_ff, cfg_.vocab_size,
                              cfg_.tie_embeddings ? "tied" : "untied",
                              cfg_.zero_centered_norm ? "zero-centred" : "plain");
  if (has(MixerKind::kAttn)) {
    const AttnConfig& a = cfg_.attn;
    s += fmt::format("  attn: {} heads ({} kv) x {}, rotary {} (theta {}){}{}\n", a.n_heads, a.n_kv_heads,
                     a.head_dim, a.rotary_dim, a.rope_theta, a.qk_norm ? ", qk_norm" : "",
                     a.output_gate ? ", output gate" : "");
  }
  if (has(MixerKind::kMla)) {
    const MlaConfig& m = cfg_.mla;
    s += fmt::format("  mla: {} heads, q_lora_rank {}, kv_lora_rank {}, qk {} nope + {} rope, v {}{}\n", m.n_heads,
                     m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim,
                     m.rope_interleave ? ", interleaved rope" : "");
  }
  if (has(MixerKind::kGdn)) {
    const GdnConfig& g = cfg_.gdn;
    s += fmt::format("  gdn: {} key heads x {}, {} value heads x {}, conv {}, chunk {}\n", g.n_k_heads,
                     g.head_k_dim, g.n_v_heads, g.head_v_dim, g.conv_kernel, g.chunk_size);
  }
  int64_t n = 0;  // whole tensors: the model's size, not this rank's part
  for (const ParamInfo& p : params_.infos()) n += p.full_shape.numel();
  const int64_t n_embed = int64_t{cfg_.vocab_size} * cfg_.d_model * (cfg_.tie_embeddings ? 1 : 2);
  s += fmt::format("  parameters: {} ({:.2f}M; {:.2f}M without the embedding{})", n, n / 1e6, (n - n_embed) / 1e6,
                   cfg_.tie_embeddings ? "" : " and the LM head");
  if (params_.tp().size > 1) s += fmt::format("; tensor-parallel rank {} of {}", params_.tp().rank, params_.tp().size);
  return s;
}

}  // namespace dt
