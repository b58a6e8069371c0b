#include "layers/mla.h"

#include <cmath>

#include "kernels/ops.h"
#include "layers/tp.h"

namespace dt {

namespace {

constexpr double kMlaNormEps = MLA::kNormEps;

const MlaConfig& checked(const MlaConfig& m, const std::string& prefix) {
  DT_CHECK(m.n_heads > 0 && m.kv_lora_rank > 0 && m.v_head_dim > 0 && m.qk_nope_head_dim >= 0 &&
               m.q_lora_rank >= 0,
           "{}: mla.n_heads ({}), mla.kv_lora_rank ({}), mla.v_head_dim ({}) must be positive and "
           "mla.qk_nope_head_dim ({}), mla.q_lora_rank ({}) not negative",
           prefix, m.n_heads, m.kv_lora_rank, m.v_head_dim, m.qk_nope_head_dim, m.q_lora_rank);
  DT_CHECK(m.qk_rope_head_dim > 0 && m.qk_rope_head_dim % 2 == 0,
           "{}: mla.qk_rope_head_dim ({}) must be even and positive", prefix, m.qk_rope_head_dim);
  return m;
}

}  // namespace

MLA::MLA(const ModelConfig& cfg, std::string prefix, TpLayout tp)
    : prefix_(std::move(prefix)),
      m_(checked(cfg.mla, prefix_)),
      tp_(tp),
      h_local_(tp_local(m_.n_heads, tp, prefix_ + ": mla.n_heads")),
      kv_a_proj_(prefix_ + ".kv_a_proj_with_mqa", cfg.d_model, int64_t{m_.kv_lora_rank} + m_.qk_rope_head_dim,
                 cfg.init_std, TpSplit::kReplicated),
      kv_b_proj_(prefix_ + ".kv_b_proj", m_.kv_lora_rank, int64_t{m_.n_heads} * (m_.qk_nope_head_dim + m_.v_head_dim),
                 cfg.init_std, TpSplit::kColumn, tp),
      o_proj_(prefix_ + ".o_proj", int64_t{m_.n_heads} * m_.v_head_dim, cfg.d_model, residual_init_std(cfg),
              TpSplit::kRow, tp),
      kv_a_layernorm_(prefix_ + ".kv_a_layernorm", m_.kv_lora_rank, kMlaNormEps, /*zero_centered=*/false) {
  const int64_t q_out = int64_t{m_.n_heads} * (m_.qk_nope_head_dim + m_.qk_rope_head_dim);
  if (m_.q_lora_rank > 0) {
    q_a_proj_.emplace(prefix_ + ".q_a_proj", cfg.d_model, m_.q_lora_rank, cfg.init_std, TpSplit::kReplicated);
    q_a_layernorm_.emplace(prefix_ + ".q_a_layernorm", m_.q_lora_rank, kMlaNormEps, /*zero_centered=*/false);
    q_b_proj_.emplace(prefix_ + ".q_b_proj", m_.q_lora_rank, q_out, cfg.init_std, TpSplit::kColumn, tp);
  } else {
    q_proj_.emplace(prefix_ + ".q_proj", cfg.d_model, q_out, cfg.init_std, TpSplit::kColumn, tp);
  }
}

double MLA::scale() const { return 1.0 / std::sqrt(static_cast<double>(m_.qk_nope_head_dim + m_.qk_rope_head_dim)); }

void MLA::declare(ParamStore& params, Arena& acts, int B, int T) {
  acts_ = &acts;
  // Parameters in HF's order.
  if (q_proj_) {
    q_proj_->declare(params, acts, B, T);
  } else {
    q_a_proj_->declare(params, acts, B, T);
    q_a_layernorm_->declare(params, acts, B, T);
    q_b_proj_->declare(params, acts, B, T);
  }
  kv_a_proj_.declare(params, acts, B, T);
  kv_a_layernorm_.declare(params, acts, B, T);
  kv_b_proj_.declare(params, acts, B, T);
  o_proj_.declare(params, acts, B, T);

  const int64_t H = h_local_, dn = m_.qk_nope_head_dim, dr = m_.qk_rope_head_dim, dv = m_.v_head_dim,
                r = m_.q_lora_rank, kvr = m_.kv_lora_rank;
  // Saved activations per layer; backward temporaries ("grad.*") shared by every MLA layer.
  auto decl = [&](const std::string& name, Shape s) {
    if (name.rfind("grad.", 0) == 0) return acts.declare_shared("scratch.mla." + name, params.act_dtype(), s);
    return acts.declare(prefix_ + "." + name, name == "lse" ? params.stat_dtype() : params.act_dtype(), s);
  };
  if (r > 0) {
    qa_ = decl("q_a", {B, T, r});
    qa_n_ = decl("q_a_normed", {B, T, r});
    dqa_n_ = decl("grad.q_a_normed", {B, T, r});
    dqa_ = decl("grad.q_a", {B, T, r});
  }
  qf_ = decl("q_full", {B, T, H, dn + dr});
  q_nope_ = decl("q_nope", {B, T, H, dn});
  q_pe_ = decl("q_pe", {B, T, H, dr});
  q_ = decl("q", {B, T, H, dn + dr});
  kva_ = decl("kv_a", {B, T, 1, kvr + dr});
  c_kv_ = decl("c_kv", {B, T, 1, kvr});
  k_pe_ = decl("k_pe", {B, T, 1, dr});
  c_kv_n_ = decl("c_kv_normed", {B, T, kvr});
  kvb_ = decl("kv_b", {B, T, H, dn + dv});
  k_nope_ = decl("k_nope", {B, T, H, dn});
  v_ = decl("v", {B, T, H, dv});
  k_ = decl("k", {B, T, H, dn + dr});
  o_ = decl("o", {B, T, H, dv});
  lse_ = decl("lse", {B, H, T});
  do_ = decl("grad.o", {B, T, H, dv});
  dq_ = decl("grad.q", {B, T, H, dn + dr});
  dk_ = decl("grad.k", {B, T, H, dn + dr});
  dv_ = decl("grad.v", {B, T, H, dv});
  dq_nope_ = decl("grad.q_nope", {B, T, H, dn});
  dq_pe_ = decl("grad.q_pe", {B, T, H, dr});
  dk_nope_ = decl("grad.k_nope", {B, T, H, dn});
  dk_pe_ = decl("grad.k_pe", {B, T, 1, dr});
  dkvb_ = decl("grad.kv_b", {B, T, H, dn + dv});
  dc_kv_n_ = decl("grad.c_kv_normed", {B, T, kvr});
  dc_kv_ = decl("grad.c_kv", {B, T, 1, kvr});
  dkva_ = decl("grad.kv_a", {B, T, 1, kvr + dr});
}

void MLA::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  const int64_t B = x.size(0), T = x.size(1), H = h_local_, dr = m_.qk_rope_head_dim;
  // Query.
  Tensor qf = buf(qf_);
  Tensor qf_flat = qf.view({B, T, qf.numel() / (B * T)});
  if (q_proj_) {
    q_proj_->forward(ctx, x, qf_flat);
  } else {
    q_a_proj_->forward(ctx, x, buf(qa_));
    q_a_layernorm_->forward(ctx, buf(qa_), buf(qa_n_));
    q_b_proj_->forward(ctx, buf(qa_n_), qf_flat);
  }
  Tensor q_nope = buf(q_nope_), q_pe = buf(q_pe_);
  head_split_forward(ctx, q_nope, q_pe, qf);
  rope_forward(ctx, q_pe, q_pe, dr, m_.rope_theta, m_.rope_interleave);  // in place: backward needs neither
  head_concat_forward(ctx, buf(q_), q_nope, q_pe);
  // Keys and values from the latent.
  Tensor kva = buf(kva_), c_kv = buf(c_kv_), k_pe = buf(k_pe_);
  kv_a_proj_.forward(ctx, x, kva.view({B, T, kva.size(3)}));
  head_split_forward(ctx, c_kv, k_pe, kva);
  kv_a_layernorm_.forward(ctx, c_kv.view({B, T, m_.kv_lora_rank}), buf(c_kv_n_));
  Tensor kvb = buf(kvb_), k_nope = buf(k_nope_), v = buf(v_);
  kv_b_proj_.forward(ctx, buf(c_kv_n_), kvb.view({B, T, kvb.numel() / (B * T)}));
  head_split_forward(ctx, k_nope, v, kvb);
  rope_forward(ctx, k_pe, k_pe, dr, m_.rope_theta, m_.rope_interleave);
  head_concat_forward(ctx, buf(k_), k_nope, k_pe);  // k_pe broadcast to every head
  // Attention and output.
  Tensor o = buf(o_);
  attention_forward(ctx, o, buf(lse_), buf(q_), buf(k_), v, scale());
  o_proj_.forward(ctx, o.view({B, T, H * m_.v_head_dim}), y);
  tp_reduce_output(ctx, tp_, y, prefix_);
}

void MLA::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  const int64_t B = dy.size(0), T = dy.size(1), H = h_local_, dr = m_.qk_rope_head_dim;
  Tensor d_o = buf(do_), dq = buf(dq_), dk = buf(dk_), dv = buf(dv_);
  o_proj_.backward(ctx, dy, d_o.view({B, T, H * m_.v_head_dim}));
  attention_backward(ctx, dq, dk, dv, d_o, buf(q_), buf(k_), buf(v_), buf(o_), buf(lse_), scale());
  // Keys and values back to the latent (dkva), then to x after the query's part.
  Tensor dk_nope = buf(dk_nope_), dk_pe = buf(dk_pe_), dkvb = buf(dkvb_);
  head_concat_backward(ctx, dk_nope, dk_pe, dk);  // dk_pe summed over heads
  tp_reduce_input_grad(ctx, tp_, dk_pe, prefix_);  // ... over every rank's heads
  rope_backward(ctx, dk_pe, dk_pe, dr, m_.rope_theta, m_.rope_interleave);
  head_split_backward(ctx, dkvb, dk_nope, dv);
  Tensor dc_kv_n = buf(dc_kv_n_), dc_kv = buf(dc_kv_), dkva = buf(dkva_);
  kv_b_proj_.backward(ctx, dkvb.view({B, T, dkvb.numel() / (B * T)}), dc_kv_n);
  tp_reduce_input_grad(ctx, tp_, dc_kv_n, prefix_);  // kv_b_proj is column-parallel
  kv_a_layernorm_.backward(ctx, dc_kv_n, dc_kv.view({B, T, m_.kv_lora_rank}));
  head_split_backward(ctx, dkva, dc_kv, dk_pe);
  // Query back to x; dq is reused for the gradient of q before RoPE.
  Tensor dq_nope = buf(dq_nope_), dq_pe = buf(dq_pe_);
  head_concat_backward(ctx, dq_nope, dq_pe, dq);
  rope_backward(ctx, dq_pe, dq_pe, dr, m_.rope_theta, m_.rope_interleave);
  head_split_backward(ctx, dq, dq_nope, dq_pe);
  Tensor dq_flat = dq.view({B, T, dq.numel() / (B * T)});
  if (q_proj_) {
    q_proj_->backward(ctx, dq_flat, dx);
    tp_reduce_input_grad(ctx, tp_, dx, prefix_);
  } else {
    q_b_proj_->backward(ctx, dq_flat, buf(dqa_n_));
    tp_reduce_input_grad(ctx, tp_, buf(dqa_n_), prefix_);  // q_b_proj is column-parallel
    q_a_layernorm_->backward(ctx, buf(dqa_n_), buf(dqa_));
    q_a_proj_->backward(ctx, buf(dqa_), dx);
  }
  // dx += the key/value path's part (GEMM beta = 1). After the query's TP reduction: kv_a_proj is
  // replicated, so its input gradient is already whole on every rank.
  kv_a_proj_.backward_accumulate(ctx, dkva.view({B, T, dkva.size(3)}), dx);
}

}  // namespace dt
