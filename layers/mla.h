// Multi-head latent attention (DeepSeek-V2/V3), `<prefix>` = "model.layers.{i}.self_attn",
// as HF DeepseekV3Attention (dn = qk_nope_head_dim, dr = qk_rope_head_dim, dv = v_head_dim):
//   q  = q_b_proj(q_a_layernorm(q_a_proj(x)))   or q_proj(x) when q_lora_rank = 0   [B, T, H, dn + dr]
//   q_nope, q_pe = split(q, [dn, dr])
//   c_kv, k_pe = split(kv_a_proj_with_mqa(x), [kv_lora_rank, dr])   k_pe: one head shared by all
//   k_nope, v = split(kv_b_proj(kv_a_layernorm(c_kv)), [dn, dv]) per head
//   q_pe, k_pe = rope(q_pe), rope(k_pe)          (adjacent pairs when rope_interleave, HF's default)
//   q = [q_nope | q_pe], k = [k_nope | k_pe]     per head
//   y = o_proj(causal_softmax(q k^T / sqrt(dn + dr)) v)
// The two norms are DeepSeek's plain RMSNorm (w starts at 1, eps 1e-6 as HF constructs them),
// whatever ModelConfig::zero_centered_norm says.
// q_b_proj (or q_proj) and kv_b_proj column-parallel; o_proj row-parallel; q_a_proj,
// kv_a_proj_with_mqa and the norms replicated. Under TP the gradients of the replicated part's
// outputs (the latents q_a, c_kv and the shared k_pe) are summed over TP where the heads meet them,
// so the replicated parameters get whole gradients and dx needs no further sum (except the part
// from a direct q_proj).
#pragma once

#include <optional>
#include <string>

#include "layers/linear.h"
#include "layers/rmsnorm.h"

namespace dt {

class MLA : public Layer {
 public:
  // tp: the heads split across the TP ranks; the latent projections and norms are replicated.
  MLA(const ModelConfig& cfg, std::string prefix, TpLayout tp = {});
  // HF's DeepseekV3RMSNorm(q_lora_rank) / (kv_lora_rank) take the default eps.
  static constexpr double kNormEps = 1e-6;

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;

  // For inference (infer/): what the latent cache holds, from the last forward. latent():
  // kv_a_layernorm(c_kv) [B, T, kv_lora_rank]; rope_key(): the shared key after RoPE [B, T, 1, dr].
  Tensor latent() const { return buf(c_kv_n_); }
  Tensor rope_key() const { return buf(k_pe_); }

 private:
  Tensor buf(int slot) const { return acts_->get(slot); }
  double scale() const;

  std::string prefix_;
  MlaConfig m_;
  TpLayout tp_;
  int64_t h_local_;  // this rank's heads
  std::optional<Linear> q_a_proj_, q_b_proj_, q_proj_;
  std::optional<RMSNorm> q_a_layernorm_;
  Linear kv_a_proj_, kv_b_proj_, o_proj_;
  RMSNorm kv_a_layernorm_;
  Arena* acts_ = nullptr;
  // Saved by forward ([B, T, heads, dim] unless noted).
  int qa_ = -1, qa_n_ = -1;              // q_a_proj output and its norm [B, T, q_lora_rank]
  int qf_ = -1;                          // q before RoPE [B, T, H, dn + dr]
  int q_nope_ = -1, q_pe_ = -1, q_ = -1;  // q_pe is rotated in place
  int kva_ = -1;                         // kv_a_proj_with_mqa output [B, T, 1, kv_lora_rank + dr]
  int c_kv_ = -1, k_pe_ = -1;            // [B, T, 1, kv_lora_rank], [B, T, 1, dr] (rotated in place)
  int c_kv_n_ = -1;                      // kv_a_layernorm output [B, T, kv_lora_rank]
  int kvb_ = -1, k_nope_ = -1, v_ = -1, k_ = -1;
  int o_ = -1, lse_ = -1;
  // Backward scratch.
  int do_ = -1, dq_ = -1, dk_ = -1, dv_ = -1, dq_nope_ = -1, dq_pe_ = -1, dqa_n_ = -1, dqa_ = -1;
  int dk_nope_ = -1, dk_pe_ = -1, dkvb_ = -1, dc_kv_n_ = -1, dc_kv_ = -1, dkva_ = -1;
};

}  // namespace dt
