// GatedDeltaNet: the Qwen3.5 `linear_attn` mixer (HF Qwen3_5GatedDeltaNet; docs/model.md, "Gated
// DeltaNet").
//   qkv  = silu(causal_depthwise_conv1d(in_proj_qkv(x)))     channels [q (Hk*dk) | k (Hk*dk) | v (Hv*dv)]
//   q    = l2norm(q) / sqrt(dk);  k = l2norm(k)                per key head, eps 1e-6
//   beta = sigmoid(in_proj_b(x));  g = -exp(A_log) softplus(in_proj_a(x) + dt_bias)
//   o    = gated_delta_rule(q, k, v, g, beta)                  value head h reads key head h / (Hv/Hk)
//   y    = out_proj( rmsnorm(o) * norm.weight * silu(in_proj_z(x)) )   per value head, eps = norm_eps
// No projection has a bias. cfg.gdn.chunk_size > 0 runs the chunked delta rule with that
// chunk, 0 the token-by-token recurrence (the CPU only in training: it has no GPU backward). On both
// devices the delta rule takes the q and k l2norms inside (GdnQkL2Norm, kernels/ops.h).
//
// Parameters (full shapes; Hugging Face names under `prefix`):
//   in_proj_qkv.weight [2*Hk*dk + Hv*dv, d_model]   in_proj_z.weight [Hv*dv, d_model]
//   in_proj_b.weight   [Hv, d_model]                in_proj_a.weight [Hv, d_model]
//   conv1d.weight      [2*Hk*dk + Hv*dv, 1, K]      A_log [Hv]    dt_bias [Hv]
//   norm.weight        [dv]                         out_proj.weight [d_model, Hv*dv]
// Under TP: in_proj_qkv and conv1d split by head within each of their [q | k | v] blocks, in_proj_z,
// in_proj_b, in_proj_a, A_log, dt_bias by head; out_proj row-parallel; norm.weight replicated (its
// gradient summed over TP).
#pragma once

#include <string>

#include "kernels/ops.h"
#include "layers/layer.h"
#include "layers/model_config.h"

namespace dt {

class GatedDeltaNet : public Layer {
 public:
  // prefix e.g. "model.layers.3.linear_attn"; tp: key and value heads split across the TP ranks (each
  // rank runs the delta rule of its Hk / tp key and Hv / tp value heads; their state never leaves it).
  GatedDeltaNet(const ModelConfig& cfg, std::string prefix, TpLayout tp = {});
  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;

  // For inference (infer/): the prefill leaves the decode state behind.
  // capture_final_state(S): every later forward also writes the delta rule's final state, one
  // dk x dv matrix per value head, into S [B, Hv, dk, dv] (the parameters' dtype; fp32 on the GPU);
  // an undefined S stops it.
  void capture_final_state(const Tensor& S) { final_state_ = S; }
  // The short convolution's input of the last forward, in_proj_qkv(x) [B, T, 2*Hk*dk + Hv*dv]: its
  // last conv_kernel - 1 rows are the conv tail a decode step continues from.
  Tensor conv_input() const { return act(qkv_pre_); }

 private:
  // This rank's (local) sizes from here on.
  int key_dim() const { return n_k_heads_ * head_k_dim_; }    // Hk*dk
  int value_dim() const { return n_v_heads_ * head_v_dim_; }  // Hv*dv
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  Tensor act(int slot) const { return acts_->get(slot); }
  Tensor param(int slot) const { return params_->param(slot); }
  Tensor grad(int slot) const { return params_->grad(slot); }
  // The l2norms' r and scales for the delta rule (q_hat, k_hat: the forward sets them).
  GdnQkL2Norm qk_l2norm() const;

  std::string prefix_;
  TpLayout tp_;
  int d_model_, n_k_heads_, n_v_heads_, head_k_dim_, head_v_dim_, conv_kernel_, chunk_size_, n_layers_;
  double norm_eps_, init_std_;

  int B_ = 0, T_ = 0;
  ParamStore* params_ = nullptr;
  Arena* acts_ = nullptr;
  // Parameter slots.
  int w_qkv_ = -1, w_z_ = -1, w_b_ = -1, w_a_ = -1, w_conv_ = -1, a_log_ = -1, dt_bias_ = -1, w_norm_ = -1,
      w_out_ = -1;
  // Saved activations (forward) and gradient buffers (backward) in `acts`; [B, T, ...].
  int qkv_pre_ = -1;  // in_proj_qkv(x)              [B, T, conv_dim]
  int qkv_ = -1;      // silu(conv(qkv_pre))          [B, T, conv_dim]
  int z_ = -1;        // in_proj_z(x)                 [B, T, Hv*dv]
  int a_ = -1, b_ = -1, g_ = -1, beta_ = -1;  //      [B, T, Hv]
  int q_ = -1, k_ = -1;  // normalised q, k           [B, T, Hk, dk]
  int q_rnorm_ = -1, k_rnorm_ = -1;  // their l2norms' r [B, T, Hk] (stat dtype), for the backward
  int o_ = -1;        // delta-rule output            [B, T, Hv, dv]
  int hidden_ = -1;   // gated-norm output            [B, T, Hv*dv]
  int chunk_saved_ = -1;  // GPU: the chunked forward's saved WY factors and states (gdn_chunk_saved_elems)
  int d_hidden_ = -1, d_o_ = -1, d_z_ = -1, d_g_ = -1, d_beta_ = -1, d_a_ = -1, d_b_ = -1, d_qkv_ = -1,
      d_qkv_pre_ = -1, d_gate_lowp_ = -1;
  Tensor x_;  // the input of the last forward (the Layer contract keeps it unchanged)
  Tensor final_state_;  // capture_final_state's target, or undefined
};

}  // namespace dt
