// The MLA decode step (layers/mla.h's forward for one token per sequence) with DeepSeek's weight
// absorption: the cache holds the normed latent c_kv and the rotated shared key only;
// mla_decode_attention folds kv_b_proj's key half into the query and its value half into the output
// (infer/decode_ops.h), so per-head keys and values are never formed. With the fp8 cache
// (infer/decode_state.h; the state's latent is f8e4m3) the latent is quantised as it is written,
// by the capture and by each step, and the attention reads it back from fp8.
#include <fmt/format.h>

#include <cmath>

#include "core/device.h"
#include "infer/decode_ops.h"
#include "infer/mixer_step.h"
#include "kernels/ops.h"
#include "layers/mla.h"

namespace dt {

namespace {

class MlaStep final : public MixerStep {
 public:
  explicit MlaStep(const MixerStepEnv& e) : m_(e.cfg.mla), N_(e.n_seqs), d_model_(e.cfg.d_model), scratch_(&e.scratch) {
    const std::string p = fmt::format("model.layers.{}.self_attn", e.layer);
    auto w = [&](const char* name) { return e.weights.param(p + name); };
    if (m_.q_lora_rank > 0) {
      w_qa_ = w(".q_a_proj.weight"), w_qa_norm_ = w(".q_a_layernorm.weight"), w_qb_ = w(".q_b_proj.weight");
    } else {
      w_q_ = w(".q_proj.weight");
    }
    w_kva_ = w(".kv_a_proj_with_mqa.weight"), w_kv_norm_ = w(".kv_a_layernorm.weight");
    w_kvb_ = w(".kv_b_proj.weight"), w_o_ = w(".o_proj.weight");
    const int64_t N = N_, H = m_.n_heads, dn = m_.qk_nope_head_dim, dr = m_.qk_rope_head_dim, dv = m_.v_head_dim,
                  r = m_.q_lora_rank, kvr = m_.kv_lora_rank;
    const DType t = e.weights.act_dtype(), st = e.weights.stat_dtype();
    auto decl = [&](const char* name, Shape s, DType d) {
      return e.scratch.declare_shared(std::string("mla.") + name, d, s);
    };
    if (r > 0) {
      qa_ = decl("q_a", {N, r}, t);
      qa_n_ = decl("q_a_normed", {N, r}, t);
      rstd_qa_ = decl("rstd_q_a", {N}, st);
    }
    qf_ = decl("q_full", {N, 1, H, dn + dr}, t);
    q_nope_ = decl("q_nope", {N, 1, H, dn}, t);
    q_pe_ = decl("q_pe", {N, 1, H, dr}, t);
    kva_ = decl("kv_a", {N, 1, 1, kvr + dr}, t);
    c_kv_ = decl("c_kv", {N, 1, 1, kvr}, t);
    k_pe_ = decl("k_pe", {N, 1, 1, dr}, t);
    c_kv_n_ = decl("c_kv_normed", {N, kvr}, t);
    rstd_kv_ = decl("rstd_c_kv", {N}, st);
    o_ = decl("o", {N, 1, H, dv}, t);
  }

  void capture(Layer& mixer, LayerDecodeState& s, int64_t T) override {
    auto* l = dynamic_cast<MLA*>(&mixer);
    DT_CHECK(l, "decode: an MLA layer's prefill mixer is not an MLA");
    const bool fp8 = s.latent_scale.defined();
    for (auto [cache, src] : {std::pair{s.latent, l->latent()}, std::pair{s.rope_key, l->rope_key()}}) {
      DT_CHECK(src.size(1) == T && src.numel() <= cache.numel() / cache.size(0),
               "decode: the prefill's {} does not fit the cache {}", src.str(), cache.str());
      if (fp8 && cache.data == s.latent.data) {
        // A context of its own on the legacy default stream: it orders with the engine's (blocking)
        // stream as the copies here do.
        Context c;
        c.device = cache.device;
        latent_cache_fill_fp8(c, s.latent, s.latent_scale, src.view({T, m_.kv_lora_rank}));
        continue;
      }
      device_copy(cache.data, cache.device, src.data, src.device, src.bytes());
    }
  }

  void step(Context& ctx, LayerDecodeState& s, const StepIO& io, const DecodePosition& pos) override {
    const Tensor& x = io.normalize(ctx);
    const int64_t N = N_, H = m_.n_heads, dn = m_.qk_nope_head_dim, dr = m_.qk_rope_head_dim, dv = m_.v_head_dim,
                  kvr = m_.kv_lora_rank;
    const Tensor qf = buf(qf_), qf_flat = qf.view({N, H * (dn + dr)});
    if (m_.q_lora_rank > 0) {
      linear_forward(ctx, buf(qa_), x, w_qa_);
      rmsnorm_forward(ctx, buf(qa_n_), buf(rstd_qa_), buf(qa_), w_qa_norm_, MLA::kNormEps, /*zero_centered=*/false);
      linear_forward(ctx, qf_flat, buf(qa_n_), w_qb_);
    } else {
      linear_forward(ctx, qf_flat, x, w_q_);
    }
    const Tensor q_nope = buf(q_nope_), q_pe = buf(q_pe_);
    head_split_forward(ctx, q_nope, q_pe, qf);
    decode_rope(ctx, q_pe.view({N, H, dr}), pos, dr, m_.rope_theta, m_.rope_interleave);
    const Tensor kva = buf(kva_), c_kv = buf(c_kv_), k_pe = buf(k_pe_), c_kv_n = buf(c_kv_n_);
    linear_forward(ctx, kva.view({N, kvr + dr}), x, w_kva_);
    head_split_forward(ctx, c_kv, k_pe, kva);
    rmsnorm_forward(ctx, c_kv_n, buf(rstd_kv_), c_kv.view({N, kvr}), w_kv_norm_, MLA::kNormEps,
                    /*zero_centered=*/false);
    decode_rope(ctx, k_pe.view({N, 1, dr}), pos, dr, m_.rope_theta, m_.rope_interleave);
    const Tensor o = buf(o_);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dn + dr));
    if (s.latent_scale.defined()) {  // the fp8 cache
      latent_cache_write_fp8(ctx, s.latent, s.latent_scale, c_kv_n, pos);
      cache_write(ctx, s.rope_key, k_pe, pos);
      mla_decode_attention_fp8(ctx, o.view({N, H, dv}), q_nope.view({N, H, dn}), q_pe.view({N, H, dr}), w_kvb_,
                               s.latent, s.latent_scale, s.rope_key, pos, scale, s.workspace);
    } else {
      cache_write(ctx, s.latent, c_kv_n, pos);
      cache_write(ctx, s.rope_key, k_pe, pos);
      mla_decode_attention(ctx, o.view({N, H, dv}), q_nope.view({N, H, dn}), q_pe.view({N, H, dr}), w_kvb_, s.latent,
                           s.rope_key, pos, scale, s.workspace);
    }
    io.project_out(ctx, w_o_, o.view({N, H * dv}));
  }

  std::vector<std::vector<Tensor>> gemv_weights() const override { return {{w_o_}}; }

 private:
  Tensor buf(int slot) const { return scratch_->get(slot); }

  MlaConfig m_;
  int N_;
  int64_t d_model_;
  Arena* scratch_;
  Tensor w_q_, w_qa_, w_qa_norm_, w_qb_, w_kva_, w_kv_norm_, w_kvb_, w_o_;
  int qa_ = -1, qa_n_ = -1, rstd_qa_ = -1, qf_ = -1, q_nope_ = -1, q_pe_ = -1, kva_ = -1, c_kv_ = -1, k_pe_ = -1,
      c_kv_n_ = -1, rstd_kv_ = -1, o_ = -1;
};

}  // namespace

std::unique_ptr<MixerStep> make_mla_step(const MixerStepEnv& env) { return std::make_unique<MlaStep>(env); }

}  // namespace dt
