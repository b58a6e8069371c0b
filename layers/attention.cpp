#include "layers/attention.h"

#include <cmath>

#include "kernels/ops.h"
#include "layers/tp.h"

namespace dt {

namespace {

const AttnConfig& checked(const AttnConfig& a, const std::string& prefix) {
  DT_CHECK(a.n_heads > 0 && a.n_kv_heads > 0 && a.head_dim > 0,
           "{}: attn.n_heads ({}), attn.n_kv_heads ({}) and attn.head_dim ({}) must be positive", prefix,
           a.n_heads, a.n_kv_heads, a.head_dim);
  DT_CHECK(a.n_heads % a.n_kv_heads == 0, "{}: attn.n_kv_heads ({}) must divide attn.n_heads ({})", prefix,
           a.n_kv_heads, a.n_heads);
  DT_CHECK(a.rotary_dim >= 0 && a.rotary_dim % 2 == 0 && a.rotary_dim <= a.head_dim,
           "{}: attn.rotary_dim ({}) must be even and between 0 and attn.head_dim ({})", prefix, a.rotary_dim,
           a.head_dim);
  return a;
}

}  // namespace

Attention::Attention(const ModelConfig& cfg, std::string prefix, TpLayout tp)
    : prefix_(std::move(prefix)),
      a_(checked(cfg.attn, prefix_)),
      tp_(tp),
      h_local_(tp_local(a_.n_heads, tp, prefix_ + ": attn.n_heads")),
      hkv_local_(1),
      kv_replicated_(tp.size > 1 && a_.n_kv_heads < tp.size),
      kv_head_(0),
      kv_std_(cfg.init_std),
      q_proj_(prefix_ + ".q_proj", cfg.d_model, int64_t{a_.n_heads} * a_.head_dim * (a_.output_gate ? 2 : 1),
              cfg.init_std, TpSplit::kColumn, tp),
      o_proj_(prefix_ + ".o_proj", int64_t{a_.n_heads} * a_.head_dim, cfg.d_model, residual_init_std(cfg),
              TpSplit::kRow, tp) {
  // q_proj with the gate is [q_h | gate_h] per head, so a contiguous cut of its rows is a cut by head.
  if (kv_replicated_) {
    // Rank r holds query heads [r H/tp, (r+1) H/tp), all in the group of KV head r Hkv / tp when tp
    // is a multiple of Hkv (H / tp divides the group size H / Hkv).
    DT_CHECK(tp.size % a_.n_kv_heads == 0,
             "{}: attn.n_kv_heads = {} is smaller than the tensor-parallel size {} and does not divide it; KV heads "
             "are replicated evenly across the ranks only when parallel.tp is a multiple of model.attn.n_kv_heads "
             "(or divides it)",
             prefix_, a_.n_kv_heads, tp.size);
    kv_head_ = int64_t{tp.rank} * a_.n_kv_heads / tp.size;
  } else {
    hkv_local_ = tp_local(a_.n_kv_heads, tp, prefix_ + ": attn.n_kv_heads");
    kv_head_ = int64_t{tp.rank} * hkv_local_;
  }
  k_proj_.name = prefix_ + ".k_proj.weight";
  v_proj_.name = prefix_ + ".v_proj.weight";
  if (a_.qk_norm) {
    q_norm_.emplace(prefix_ + ".q_norm", a_.head_dim, cfg.norm_eps, cfg.zero_centered_norm, h_local_, tp.size > 1);
    k_norm_.emplace(prefix_ + ".k_norm", a_.head_dim, cfg.norm_eps, cfg.zero_centered_norm, hkv_local_,
                    tp.size > 1);
  }
}

void Attention::kv_declare(ParamStore& params, KvProjection& p, double std) {
  const int64_t full = int64_t{a_.n_kv_heads} * a_.head_dim, C = q_proj_.in_features();
  ParamInfo info{p.name, {full, C}, Init::kNormal, std, kv_replicated_ ? TpSplit::kReplicated : TpSplit::kColumn,
                 /*decay=*/true};
  info.tp_partial_grad = kv_replicated_;  // only this rank's query heads reach its KV head's rows
  p.slot = params.declare(std::move(info));
  p.rows = hkv_local_ * a_.head_dim;
  p.row0 = kv_replicated_ ? kv_head_ * a_.head_dim : 0;
}

void Attention::kv_forward(Context& ctx, KvProjection& p, const Tensor& x, const Tensor& y) {
  p.x = x;
  linear_forward(ctx, y, x, params_->param(p.slot).narrow0(p.row0, p.rows));
}

// dx += dy W[row0 : row0 + rows] (ADDED to dx, the GEMM's beta = 1: x feeds q_proj, k_proj and
// v_proj, whose input gradients are summed there; under TP the sum is this rank's part, reduced
// with q_proj's by the caller); dW's rows accumulated as always.
void Attention::kv_backward(Context& ctx, const KvProjection& p, const Tensor& dy, const Tensor& dx) {
  linear_backward(ctx, dx, params_->grad(p.slot).narrow0(p.row0, p.rows), dy, p.x,
                  params_->param(p.slot).narrow0(p.row0, p.rows), 1.0, /*accumulate_dx=*/true);
}

void Attention::declare(ParamStore& params, Arena& acts, int B, int T) {
  acts_ = &acts;
  params_ = &params;
  q_proj_.declare(params, acts, B, T);  // the declaration order is the parameters' order
  kv_declare(params, k_proj_, kv_std_);
  kv_declare(params, v_proj_, kv_std_);
  o_proj_.declare(params, acts, B, T);
  if (q_norm_) {
    q_norm_->declare(params, acts, B, T);
    k_norm_->declare(params, acts, B, T);
  }
  const int64_t H = h_local_, Hkv = hkv_local_, hd = a_.head_dim;
  // Saved activations per layer; backward temporaries ("grad.*") shared by every attention layer.
  auto decl = [&](const std::string& name, Shape s) {
    if (name.rfind("grad.", 0) == 0) return acts.declare_shared("scratch.attn." + name, params.act_dtype(), s);
    return acts.declare(prefix_ + "." + name, name == "lse" ? params.stat_dtype() : params.act_dtype(), s);
  };
  qg_ = decl("qg", {B, T, q_proj_.out_features()});
  if (a_.output_gate) {
    q_raw_ = decl("q_raw", {B, T, H, hd});
    gate_ = decl("gate", {B, T, H, hd});
    og_ = decl("o_gated", {B, T, H, hd});
    dgate_ = decl("grad.gate", {B, T, H, hd});
    do_ = decl("grad.o", {B, T, H, hd});
    dqg_ = decl("grad.qg", {B, T, H, 2 * hd});
  }
  k_raw_ = decl("k_raw", {B, T, Hkv, hd});
  v_ = decl("v", {B, T, Hkv, hd});
  if (a_.qk_norm) {
    q_n_ = decl("q_normed", {B, T, H, hd});
    k_n_ = decl("k_normed", {B, T, Hkv, hd});
    dq_raw_ = decl("grad.q_raw", {B, T, H, hd});
    dk_raw_ = decl("grad.k_raw", {B, T, Hkv, hd});
  }
  q_ = decl("q", {B, T, H, hd});
  k_ = decl("k", {B, T, Hkv, hd});
  o_ = decl("o", {B, T, H, hd});
  lse_ = decl("lse", {B, H, T});
  dog_ = decl("grad.o_proj_in", {B, T, H, hd});
  dq_ = decl("grad.q", {B, T, H, hd});
  dk_ = decl("grad.k", {B, T, Hkv, hd});
  dv_ = decl("grad.v", {B, T, Hkv, hd});
}

void Attention::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  const int64_t B = x.size(0), T = x.size(1), H = h_local_, hd = a_.head_dim;
  Tensor qg = buf(qg_);
  q_proj_.forward(ctx, x, qg);
  Tensor q_raw;
  if (a_.output_gate) {
    q_raw = buf(q_raw_);
    head_split_forward(ctx, q_raw, buf(gate_), qg.view({B, T, H, 2 * hd}));
  } else {
    q_raw = qg.view({B, T, H, hd});
  }
  Tensor k_raw = buf(k_raw_), v = buf(v_);
  kv_forward(ctx, k_proj_, x, k_raw.view({B, T, hkv_local_ * hd}));
  kv_forward(ctx, v_proj_, x, v.view({B, T, hkv_local_ * hd}));
  Tensor q_n = q_raw, k_n = k_raw;
  if (a_.qk_norm) {
    q_n = buf(q_n_);
    k_n = buf(k_n_);
    q_norm_->forward(ctx, q_raw, q_n);
    k_norm_->forward(ctx, k_raw, k_n);
  }
  Tensor q = buf(q_), k = buf(k_), o = buf(o_);
  rope_forward(ctx, q, q_n, a_.rotary_dim, a_.rope_theta, /*interleaved=*/false);
  rope_forward(ctx, k, k_n, a_.rotary_dim, a_.rope_theta, /*interleaved=*/false);
  attention_forward(ctx, o, buf(lse_), q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)));
  if (a_.output_gate) {
    sigmoid_gate_forward(ctx, buf(og_), o, buf(gate_));
    o = buf(og_);
  }
  o_proj_.forward(ctx, o.view({B, T, H * hd}), y);
  tp_reduce_output(ctx, tp_, y, prefix_);
}

void Attention::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  const int64_t B = dy.size(0), T = dy.size(1), H = h_local_, hd = a_.head_dim;
  Tensor dog = buf(dog_);
  o_proj_.backward(ctx, dy, dog.view({B, T, H * hd}));
  Tensor d_o = dog;  // gradient of the attention output o
  if (a_.output_gate) {
    d_o = buf(do_);
    sigmoid_gate_backward(ctx, d_o, buf(dgate_), dog, buf(o_), buf(gate_));
  }
  Tensor dq = buf(dq_), dk = buf(dk_), dv = buf(dv_);
  attention_backward(ctx, dq, dk, dv, d_o, buf(q_), buf(k_), buf(v_), buf(o_), buf(lse_),
                     1.0 / std::sqrt(static_cast<double>(hd)));
  rope_backward(ctx, dq, dq, a_.rotary_dim, a_.rope_theta, /*interleaved=*/false);
  rope_backward(ctx, dk, dk, a_.rotary_dim, a_.rope_theta, /*interleaved=*/false);
  if (a_.qk_norm) {
    q_norm_->backward(ctx, dq, buf(dq_raw_));
    k_norm_->backward(ctx, dk, buf(dk_raw_));
    dq = buf(dq_raw_);
    dk = buf(dk_raw_);
  }
  Tensor dqg = dq;
  if (a_.output_gate) {
    dqg = buf(dqg_);
    head_split_backward(ctx, dqg, dq, buf(dgate_));
  }
  q_proj_.backward(ctx, dqg.view({B, T, q_proj_.out_features()}), dx);  // written
  kv_backward(ctx, k_proj_, dk.view({B, T, hkv_local_ * hd}), dx);     // added
  kv_backward(ctx, v_proj_, dv.view({B, T, hkv_local_ * hd}), dx);     // added
  tp_reduce_input_grad(ctx, tp_, dx, prefix_);
}

}  // namespace dt
