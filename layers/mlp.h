// SwiGLU MLP, `<prefix>` = "model.layers.{i}.mlp":
//   y = down_proj(silu(gate_proj(x)) * up_proj(x))     (HF Qwen3_5MLP)
// gate_proj, up_proj [d_ff, d_model] column-parallel; down_proj [d_model, d_ff] row-parallel.
#pragma once

#include <string>

#include "layers/linear.h"

namespace dt {

class MLP : public Layer {
 public:
  MLP(const ModelConfig& cfg, std::string prefix, TpLayout tp = {});  // tp: d_ff split across the TP ranks

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;

 private:
  std::string prefix_;
  TpLayout tp_;
  Linear gate_proj_, up_proj_, down_proj_;
  Arena* acts_ = nullptr;
  // saved: gate, up, h = silu(gate) * up [B, T, F]; backward scratch: dh, dgate, dup [B, T, F], dx2 [B, T, C]
  int gate_ = -1, up_ = -1, h_ = -1, dh_ = -1, dgate_ = -1, dup_ = -1;
};

}  // namespace dt
