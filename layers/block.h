// One pre-norm residual block, `<prefix>` = "model.layers.{i}" (HF Qwen3_5DecoderLayer):
//   h = x + mixer(input_layernorm(x))
//   y = h + mlp(post_attention_layernorm(h))
// The mixer comes from the layer pattern: kAttn -> Attention, kMla -> MLA (both `self_attn`),
// kGdn -> GatedDeltaNet (`linear_attn`).
#pragma once

#include <memory>
#include <string>

#include "layers/mlp.h"
#include "layers/rmsnorm.h"

namespace dt {

// The mixer of layer `index` of cfg.layers, named under "model.layers.{index}".
std::unique_ptr<Layer> make_mixer(const ModelConfig& cfg, int index, TpLayout tp = {});

class Block : public Layer {
 public:
  Block(const ModelConfig& cfg, int index, TpLayout tp = {});  // tp: the mixer and MLP split by head

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;

  MixerKind kind() const { return kind_; }
  Layer& mixer() { return *mixer_; }  // Attention, MLA or GatedDeltaNet, by kind()

 private:
  Tensor buf(int slot) const { return acts_->get(slot); }

  std::string prefix_;
  MixerKind kind_;
  int64_t d_model_;
  RMSNorm input_layernorm_, post_attention_layernorm_;
  std::unique_ptr<Layer> mixer_;
  MLP mlp_;
  Arena* acts_ = nullptr;
  // Saved [B, T, C]: normed input, mixer output, h, normed h, mlp output.
  int n1_ = -1, m_ = -1, h_ = -1, n2_ = -1, f_ = -1;
  // Backward scratch [B, T, C].
  int g0_ = -1, g1_ = -1;
};

}  // namespace dt
