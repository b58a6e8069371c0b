// The Gated DeltaNet decode step (layers/gdn.h's forward for one token per sequence): the same ops
// on [N, 1, ...] tensors, the causal conv continued from its tail, the delta rule from the state.
#include <fmt/format.h>

#include <cmath>

#include "core/device.h"
#include "infer/decode_ops.h"
#include "infer/mixer_step.h"
#include "kernels/ops.h"
#include "layers/gdn.h"

namespace dt {

namespace {

class GdnStep final : public MixerStep {
 public:
  explicit GdnStep(const MixerStepEnv& e)
      : g_(e.cfg.gdn), N_(e.n_seqs), d_model_(e.cfg.d_model), eps_(e.cfg.norm_eps), scratch_(&e.scratch) {
    const std::string p = fmt::format("model.layers.{}.linear_attn", e.layer);
    auto w = [&](const char* name) { return e.weights.param(p + name); };
    w_qkv_ = w(".in_proj_qkv.weight"), w_z_ = w(".in_proj_z.weight"), w_b_ = w(".in_proj_b.weight");
    w_a_ = w(".in_proj_a.weight"), w_conv_ = w(".conv1d.weight"), a_log_ = w(".A_log"), dt_bias_ = w(".dt_bias");
    w_norm_ = w(".norm.weight"), w_out_ = w(".out_proj.weight");
    const int64_t N = N_, Hk = g_.n_k_heads, Hv = g_.n_v_heads, dk = g_.head_k_dim, dv = g_.head_v_dim;
    // The gate inputs and gates are statistics (fp32 on the GPU), the rest activations (bf16 there).
    const DType t = e.weights.act_dtype(), st = e.weights.stat_dtype();
    auto decl = [&](const char* name, Shape s, DType d) {
      return e.scratch.declare_shared(std::string("gdn.") + name, d, s);
    };
    qkv_pre_ = decl("qkv_pre", {N, 1, conv_dim()}, t);
    qkv_ = decl("qkv", {N, 1, conv_dim()}, t);
    z_ = decl("z", {N, 1, Hv * dv}, t);
    a_ = decl("a", {N, 1, Hv}, st);
    b_ = decl("b", {N, 1, Hv}, st);
    g_slot_ = decl("g", {N, 1, Hv}, st);
    beta_ = decl("beta", {N, 1, Hv}, st);
    q_ = decl("q", {N, 1, Hk, dk}, t);
    k_ = decl("k", {N, 1, Hk, dk}, t);
    o_ = decl("o", {N, 1, Hv, dv}, t);
    hidden_ = decl("hidden", {N, 1, Hv * dv}, t);
  }

  void before_prefill(Layer& mixer, LayerDecodeState& s) override {
    gdn(mixer).capture_final_state(s.recurrent.narrow0(0, 1));
  }

  void capture(Layer& mixer, LayerDecodeState& s, int64_t T) override {
    GatedDeltaNet& layer = gdn(mixer);
    layer.capture_final_state(Tensor{});
    if (!s.conv_tail.defined()) return;
    // The tail is the conv's last K-1 inputs, zeros before the first token (the conv's left padding).
    const Tensor in = layer.conv_input();  // [1, T, C]
    const int64_t C = conv_dim(), K1 = g_.conv_kernel - 1;
    const size_t row = static_cast<size_t>(C) * dtype_size(in.dtype);
    auto* dst = static_cast<char*>(s.conv_tail.data);
    for (int64_t i = 0; i < K1; ++i) {
      const int64_t t = T - K1 + i;
      if (t >= 0)
        device_copy(dst + i * row, s.conv_tail.device, static_cast<const char*>(in.data) + t * row, in.device, row);
      else
        device_memset(dst + i * row, 0, row, s.conv_tail.device);
    }
  }

  void step(Context& ctx, LayerDecodeState& s, const StepIO& io, const DecodePosition& pos) override {
    (void)pos;  // the state is the whole past
    const int64_t N = N_, Hk = g_.n_k_heads, Hv = g_.n_v_heads, dk = g_.head_k_dim, dv = g_.head_v_dim;
    const Tensor qkv_pre = buf(qkv_pre_), qkv = buf(qkv_), z = buf(z_), o = buf(o_), hidden = buf(hidden_);
    const Tensor h2 = hidden.view({N, Hv * dv});
    if (decode_gemv_supported(ctx.device, N, d_model_) && decode_gemv_supported(ctx.device, N, Hv * dv)) {
      // Three kernels: the input norm, the projections and the conv in one GEMV, the rest of the
      // token in one op, the output projection with the residual.
      const Tensor z2 = z.view({N, Hv * dv});
      decode_gemv(ctx,
                  {GemvOut::with_conv(w_qkv_, qkv.view({N, conv_dim()}), w_conv_, s.conv_tail).settled(),
                   {w_z_, z2, {}},
                   {w_b_, buf(b_).view({N, Hv}), {}},
                   {w_a_, buf(a_).view({N, Hv}), {}}},
                  io.gemv_in(), io.l2_after(w_qkv_));
      gdn_decode_step(ctx, h2, s.recurrent, qkv.view({N, conv_dim()}), z2, buf(a_).view({N, Hv}),
                      buf(b_).view({N, Hv}), a_log_, dt_bias_, w_norm_, Hk, dk, 1.0 / std::sqrt(double(dk)), eps_);
      io.project_out(ctx, w_out_, h2);
      return;
    }
    const Tensor x3 = io.normalize(ctx).view({N, 1, d_model_});
    linear_forward(ctx, qkv_pre, x3, w_qkv_);
    linear_forward(ctx, z, x3, w_z_);
    linear_forward(ctx, buf(b_), x3, w_b_);
    linear_forward(ctx, buf(a_), x3, w_a_);
    decode_conv_step(ctx, qkv.view({N, conv_dim()}), s.conv_tail, qkv_pre.view({N, conv_dim()}), w_conv_);
    gdn_gates_forward(ctx, buf(g_slot_), buf(beta_), buf(a_), buf(b_), a_log_, dt_bias_);
    const int64_t key_dim = Hk * dk;
    gdn_l2norm_forward(ctx, buf(q_), gdn_head_view(qkv, 0, Hk, dk), 1.0 / std::sqrt(double(dk)));
    gdn_l2norm_forward(ctx, buf(k_), gdn_head_view(qkv, key_dim, Hk, dk), 1.0);
    // One token of the recurrence, the state read and written in place.
    gdn_recurrent_forward(ctx, o, s.recurrent, buf(q_), buf(k_), gdn_head_view(qkv, 2 * key_dim, Hv, dv),
                          buf(g_slot_), buf(beta_), s.recurrent);
    gdn_norm_forward(ctx, hidden.view({N, 1, Hv, dv}), o, z.view({N, 1, Hv, dv}), w_norm_, eps_);
    io.project_out(ctx, w_out_, h2);
  }

  std::vector<std::vector<Tensor>> gemv_weights() const override {
    return {{w_qkv_, w_z_, w_b_, w_a_}, {w_out_}};
  }

 private:
  static GatedDeltaNet& gdn(Layer& mixer) {
    auto* l = dynamic_cast<GatedDeltaNet*>(&mixer);
    DT_CHECK(l, "decode: a GDN layer's prefill mixer is not a GatedDeltaNet");
    return *l;
  }
  int64_t conv_dim() const {
    return 2 * int64_t{g_.n_k_heads} * g_.head_k_dim + int64_t{g_.n_v_heads} * g_.head_v_dim;
  }
  Tensor buf(int slot) const { return scratch_->get(slot); }

  GdnConfig g_;
  int N_;
  int64_t d_model_;
  double eps_;
  Arena* scratch_;
  Tensor w_qkv_, w_z_, w_b_, w_a_, w_conv_, a_log_, dt_bias_, w_norm_, w_out_;
  int qkv_pre_ = -1, qkv_ = -1, z_ = -1, a_ = -1, b_ = -1, g_slot_ = -1, beta_ = -1, q_ = -1, k_ = -1, o_ = -1,
      hidden_ = -1;
};

}  // namespace

std::unique_ptr<MixerStep> make_gdn_step(const MixerStepEnv& env) { return std::make_unique<GdnStep>(env); }

}  // namespace dt
