// The softmax GQA decode step (layers/attention.h's forward for one token per sequence): the new
// key (after qk_norm and RoPE at its position) and value go into the KV cache, and the query
// attends over the whole cache.
#include <fmt/format.h>

#include <cmath>

#include "core/device.h"
#include "infer/decode_ops.h"
#include "infer/mixer_step.h"
#include "kernels/ops.h"
#include "layers/attention.h"

namespace dt {

namespace {

class AttnStep final : public MixerStep {
 public:
  explicit AttnStep(const MixerStepEnv& e)
      : a_(e.cfg.attn), N_(e.n_seqs), d_model_(e.cfg.d_model), eps_(e.cfg.norm_eps),
        zero_centered_(e.cfg.zero_centered_norm), scratch_(&e.scratch) {
    const std::string p = fmt::format("model.layers.{}.self_attn", e.layer);
    w_q_ = e.weights.param(p + ".q_proj.weight");
    w_k_ = e.weights.param(p + ".k_proj.weight");
    w_v_ = e.weights.param(p + ".v_proj.weight");
    w_o_ = e.weights.param(p + ".o_proj.weight");
    if (a_.qk_norm) {
      w_qn_ = e.weights.param(p + ".q_norm.weight");
      w_kn_ = e.weights.param(p + ".k_norm.weight");
    }
    const int64_t N = N_, H = a_.n_heads, Hkv = a_.n_kv_heads, hd = a_.head_dim;
    const DType t = e.weights.act_dtype();
    auto decl = [&](const char* name, Shape s, DType d) {
      return e.scratch.declare_shared(std::string("attn.") + name, d, s);
    };
    qg_ = decl("qg", {N, 1, w_q_.size(0)}, t);
    q_ = decl("q", {N, 1, H, hd}, t);
    gate_ = decl("gate", {N, 1, H, hd}, t);
    k_ = decl("k", {N, 1, Hkv, hd}, t);
    v_ = decl("v", {N, 1, Hkv, hd}, t);
    o_ = decl("o", {N, 1, H, hd}, t);
    og_ = decl("o_gated", {N, 1, H, hd}, t);
  }

  void capture(Layer& mixer, LayerDecodeState& s, int64_t T) override {
    auto* l = dynamic_cast<Attention*>(&mixer);
    DT_CHECK(l, "decode: an attention layer's prefill mixer is not an Attention");
    // Sequence 0's first T cache positions are one contiguous block.
    for (auto [cache, src] : {std::pair{s.keys, l->keys()}, std::pair{s.values, l->values()}}) {
      DT_CHECK(src.size(1) == T && src.numel() <= cache.numel() / cache.size(0),
               "decode: the prefill's {} does not fit the cache {}", src.str(), cache.str());
      device_copy(cache.data, cache.device, src.data, src.device, src.bytes());
    }
  }

  void step(Context& ctx, LayerDecodeState& s, const StepIO& io, const DecodePosition& pos) override {
    const int64_t N = N_, H = a_.n_heads, Hkv = a_.n_kv_heads, hd = a_.head_dim;
    const Tensor qg = buf(qg_), k = buf(k_), v = buf(v_);
    const bool gemv = decode_gemv_supported(ctx.device, N, d_model_) && decode_gemv_supported(ctx.device, N, H * hd);
    if (gemv) {  // the input norm and the three projections in one kernel
      decode_gemv(ctx,
                  {{w_q_, qg.view({N, w_q_.size(0)}), {}}, {w_k_, k.view({N, Hkv * hd}), {}},
                   {w_v_, v.view({N, Hkv * hd}), {}}},
                  io.gemv_in(), io.l2_after(w_q_));
    } else {
      const Tensor x3 = io.normalize(ctx).view({N, 1, d_model_});
      linear_forward(ctx, qg, x3, w_q_);
      linear_forward(ctx, k.view({N, 1, Hkv * hd}), x3, w_k_);
      linear_forward(ctx, v.view({N, 1, Hkv * hd}), x3, w_v_);
    }
    // q/k norms, RoPE and the cache writes in one op.
    AttnPrepArgs prep;
    prep.q = buf(q_), prep.gate = a_.output_gate ? buf(gate_) : Tensor{}, prep.k_cache = s.keys,
    prep.v_cache = s.values;
    prep.qg = qg, prep.k = k, prep.v = v, prep.qn_w = w_qn_, prep.kn_w = w_kn_;
    prep.n_heads = H, prep.n_kv_heads = Hkv, prep.head_dim = hd, prep.rotary_dim = a_.rotary_dim;
    prep.eps = eps_, prep.theta = a_.rope_theta, prep.zero_centered = zero_centered_;
    decode_attn_prep(ctx, prep, pos);
    Tensor o = buf(o_);
    decode_attention(ctx, o.view({N, H, hd}), buf(q_).view({N, H, hd}), s.keys, s.values, pos,
                     1.0 / std::sqrt(static_cast<double>(hd)), s.workspace);
    if (a_.output_gate) {
      if (gemv) {  // the gate taken on the output projection's input
        decode_gemv(ctx, {GemvOut(w_o_, io.y, io.h).settled()},
                    GemvIn::gated(o.view({N, H * hd}), buf(gate_).view({N, H * hd})), io.l2_after(w_o_));
        return;
      }
      sigmoid_gate_forward(ctx, buf(og_), o, buf(gate_));
      o = buf(og_);
    }
    io.project_out(ctx, w_o_, o.view({N, H * hd}));
  }

  std::vector<std::vector<Tensor>> gemv_weights() const override { return {{w_q_, w_k_, w_v_}, {w_o_}}; }

 private:
  Tensor buf(int slot) const { return scratch_->get(slot); }

  AttnConfig a_;
  int N_;
  int64_t d_model_;
  double eps_;
  bool zero_centered_;
  Arena* scratch_;
  Tensor w_q_, w_k_, w_v_, w_o_, w_qn_, w_kn_;
  int qg_ = -1, q_ = -1, gate_ = -1, k_ = -1, v_ = -1, o_ = -1, og_ = -1;
};

}  // namespace

std::unique_ptr<MixerStep> make_attn_step(const MixerStepEnv& env) { return std::make_unique<AttnStep>(env); }

}  // namespace dt
