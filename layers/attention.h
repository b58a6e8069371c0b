// Softmax attention with grouped KV heads, `<prefix>` = "model.layers.{i}.self_attn"
// (HF Qwen3_5Attention when qk_norm and output_gate are on; Llama-style GQA when off).
//   qg = q_proj(x)                       [B, T, H * hd], or [B, T, H, 2 hd] = [q_h | gate_h] per head
//   q, gate = chunk(qg, 2, -1)           (output_gate only)
//   k = k_proj(x), v = v_proj(x)         [B, T, Hkv, hd]
//   q, k = q_norm(q), k_norm(k)          (qk_norm only: per-head RMSNorm, zero-centred when the model's are)
//   q, k = rope(q), rope(k)              (rotate-half on the first rotary_dim dims of each head)
//   o = causal_softmax(q k^T / sqrt(hd)) v   (query head h reads KV head h / (H / Hkv))
//   o = o * sigmoid(gate)                (output_gate only)
//   y = o_proj(o)
// q_proj, k_proj, v_proj column-parallel; o_proj row-parallel; q_norm, k_norm replicated (their
// gradients summed over TP). Under TP each rank runs the above on its H / tp heads and Hkv / tp KV heads.
//
// Fewer KV heads than TP ranks (Hkv < tp, tp % Hkv == 0): rank r's H / tp query heads all read KV
// head g = r Hkv / tp, which it computes itself (replicated on the tp / Hkv ranks sharing it).
// k_proj and v_proj are then held whole on every rank (replicated, [Hkv hd, C]: at most tp / 2 heads)
// and each rank uses the hd rows of head g. Their gradient on a rank covers only that rank's query
// heads (other heads' rows stay zero), so, like q_norm / k_norm, they carry tp_partial_grad and the
// sum over TP is exactly the one-process gradient; checkpoints hold them once, whole.
#pragma once

#include <optional>
#include <string>

#include "layers/linear.h"
#include "layers/rmsnorm.h"

namespace dt {

class Attention : public Layer {
 public:
  // tp: the heads (and KV heads) are split across the TP ranks, each rank holding whole heads.
  Attention(const ModelConfig& cfg, std::string prefix, TpLayout tp = {});

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;

  // For inference (infer/): what a KV cache holds, from the last forward. keys(): after qk_norm
  // and RoPE, as attention reads them; values(): v. Both [B, T, Hkv, hd] (this rank's KV heads).
  Tensor keys() const { return buf(k_); }
  Tensor values() const { return buf(v_); }

 private:
  // A buffer of this layer's activations (or backward scratch) by slot.
  Tensor buf(int slot) const { return acts_->get(slot); }

  // k_proj or v_proj: y [B, T, rows] = x W[row0 : row0 + rows]^T. W is this rank's column part
  // (row0 = 0), or the whole replicated tensor when KV heads are replicated (row0 = g hd).
  struct KvProjection {
    std::string name;  // "<prefix>.k_proj.weight"
    int slot = -1;
    int64_t row0 = 0, rows = 0;
    Tensor x;  // the forward input (Layer contract: unchanged until backward)
  };
  void kv_declare(ParamStore& params, KvProjection& p, double std);
  void kv_forward(Context& ctx, KvProjection& p, const Tensor& x, const Tensor& y);
  // Adds this projection's input gradient into dx (GEMM beta = 1).
  void kv_backward(Context& ctx, const KvProjection& p, const Tensor& dy, const Tensor& dx);

  std::string prefix_;
  AttnConfig a_;
  TpLayout tp_;
  int64_t h_local_, hkv_local_;  // this rank's query and KV heads
  bool kv_replicated_;           // Hkv < tp: this rank computes KV head kv_head_ of the whole k/v_proj
  int64_t kv_head_;              // the first KV head this rank computes (its index in the whole tensors)
  double kv_std_;
  Linear q_proj_, o_proj_;
  KvProjection k_proj_, v_proj_;
  ParamStore* params_ = nullptr;
  std::optional<RMSNorm> q_norm_, k_norm_;
  Arena* acts_ = nullptr;
  // Saved by forward. Shapes: [B, T, heads, hd] unless noted.
  int qg_ = -1;                  // q_proj output [B, T, H * hd * (gate ? 2 : 1)]
  int q_raw_ = -1, gate_ = -1;   // q before q_norm, the gate (output_gate only)
  int k_raw_ = -1, v_ = -1;      // k before k_norm, v
  int q_n_ = -1, k_n_ = -1;      // after q_norm / k_norm (qk_norm only)
  int q_ = -1, k_ = -1;          // after RoPE: what attention reads
  int o_ = -1, lse_ = -1, og_ = -1;  // attention output, its lse [B, H, T], gated output (output_gate only)
  // Backward scratch.
  int dog_ = -1, do_ = -1, dgate_ = -1, dq_ = -1, dk_ = -1, dv_ = -1, dq_raw_ = -1, dk_raw_ = -1, dqg_ = -1;
};

}  // namespace dt
