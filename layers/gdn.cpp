#include "layers/gdn.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/ops.h"
#include "layers/tp.h"
#include "parallel/process_grid.h"

namespace dt {

GatedDeltaNet::GatedDeltaNet(const ModelConfig& cfg, std::string prefix, TpLayout tp)
    : prefix_(std::move(prefix)),
      tp_(tp),
      d_model_(cfg.d_model),
      n_k_heads_(cfg.gdn.n_k_heads),
      n_v_heads_(cfg.gdn.n_v_heads),
      head_k_dim_(cfg.gdn.head_k_dim),
      head_v_dim_(cfg.gdn.head_v_dim),
      conv_kernel_(cfg.gdn.conv_kernel),
      chunk_size_(cfg.gdn.chunk_size),
      n_layers_(cfg.n_layers()),
      norm_eps_(cfg.norm_eps),
      init_std_(cfg.init_std) {
  const GdnConfig& g = cfg.gdn;
  DT_CHECK(cfg.d_model > 0, "{}: d_model must be positive, got {}", prefix_, cfg.d_model);
  DT_CHECK(g.n_k_heads > 0 && g.n_v_heads > 0 && g.head_k_dim > 0 && g.head_v_dim > 0,
           "{}: gdn n_k_heads, n_v_heads, head_k_dim, head_v_dim must be positive, got {}, {}, {}, {}", prefix_,
           g.n_k_heads, g.n_v_heads, g.head_k_dim, g.head_v_dim);
  DT_CHECK(g.n_v_heads % g.n_k_heads == 0,
           "{}: gdn n_v_heads ({}) must be a multiple of n_k_heads ({}): each key head serves a whole group of "
           "value heads",
           prefix_, g.n_v_heads, g.n_k_heads);
  DT_CHECK(g.conv_kernel >= 1, "{}: gdn conv_kernel must be >= 1, got {}", prefix_, g.conv_kernel);
  DT_CHECK(g.chunk_size >= 0, "{}: gdn chunk_size must be >= 0 (0: recurrent form), got {}", prefix_,
           g.chunk_size);
  // The local heads; Hv / Hk is the same on every rank, so value head j still reads key head j / (Hv/Hk).
  n_k_heads_ = static_cast<int>(tp_local(g.n_k_heads, tp, prefix_ + ": gdn.n_k_heads"));
  n_v_heads_ = static_cast<int>(tp_local(g.n_v_heads, tp, prefix_ + ": gdn.n_v_heads"));
}

void GatedDeltaNet::declare(ParamStore& params, Arena& acts, int B, int T) {
  params_ = &params;
  acts_ = &acts;
  B_ = B, T_ = T;
  const int64_t D = d_model_, Hv = n_v_heads_, dv = head_v_dim_;
  const std::string& p = prefix_;
  // Megatron's scaled init for the projection that writes into the residual stream.
  const double out_std = init_std_ / std::sqrt(2.0 * std::max(n_layers_, 1));
  // Full (declared) sizes; the ParamStore keeps this rank's part. Column-parallel tensors split by
  // head; in_proj_qkv and conv1d hold three blocks [q | k | v], each split by head.
  const int64_t key_full = int64_t{key_dim()} * tp_.size, value_full = int64_t{value_dim()} * tp_.size,
                hv_full = Hv * tp_.size, conv_full = 2 * key_full + value_full;
  const std::vector<int64_t> qkv_blocks = {key_full, key_full, value_full};
  auto column = [&](std::string name, Shape shape, Init init, double std, bool decay,
                    std::vector<int64_t> blocks = {}) {
    ParamInfo info{p + name, shape, init, std, TpSplit::kColumn, decay};
    info.tp_blocks = std::move(blocks);
    return params.declare(std::move(info));
  };
  w_qkv_ = column(".in_proj_qkv.weight", {conv_full, D}, Init::kNormal, init_std_, true, qkv_blocks);
  w_z_ = column(".in_proj_z.weight", {value_full, D}, Init::kNormal, init_std_, true);
  w_b_ = column(".in_proj_b.weight", {hv_full, D}, Init::kNormal, init_std_, true);
  w_a_ = column(".in_proj_a.weight", {hv_full, D}, Init::kNormal, init_std_, true);
  w_conv_ = column(".conv1d.weight", {conv_full, 1, conv_kernel_}, Init::kNormal, init_std_, true, qkv_blocks);
  a_log_ = column(".A_log", {hv_full}, Init::kALog, 0.0, /*decay=*/false);
  dt_bias_ = column(".dt_bias", {hv_full}, Init::kDtBias, 0.0, /*decay=*/false);
  ParamInfo norm{p + ".norm.weight", {dv}, Init::kOnes, 0.0, TpSplit::kReplicated, /*decay=*/false};
  norm.tp_partial_grad = tp_.size > 1;  // each rank's gradient covers its own value heads
  w_norm_ = params.declare(std::move(norm));
  w_out_ = params.declare({p + ".out_proj.weight", {D, value_full}, Init::kNormal, out_std, TpSplit::kRow});

  // Saved activations per layer, backward temporaries ("grad.*") shared by every GDN layer. The gate
  // inputs and the gates are statistics: fp32 on the GPU (docs/architecture.md, "Precision").
  auto decl = [&](const std::string& name, Shape s) {
    static const char* const kFp32[] = {"a",      "b",       "g",         "beta",   "q_rnorm",
                                        "k_rnorm", "grad.g", "grad.beta", "grad.a", "grad.b"};
    DType t = params.act_dtype();
    for (const char* f : kFp32)
      if (name == f) t = params.stat_dtype();
    if (name.rfind("grad.", 0) == 0) return acts.declare_shared("scratch.gdn." + name, t, s);
    return acts.declare(p + "." + name, t, s);
  };
  const int64_t Hk = n_k_heads_, dk = head_k_dim_;
  qkv_pre_ = decl("qkv_pre", {B, T, conv_dim()});
  qkv_ = decl("qkv", {B, T, conv_dim()});
  z_ = decl("z", {B, T, value_dim()});
  a_ = decl("a", {B, T, Hv});
  b_ = decl("b", {B, T, Hv});
  g_ = decl("g", {B, T, Hv});
  beta_ = decl("beta", {B, T, Hv});
  q_ = decl("q", {B, T, Hk, dk});
  k_ = decl("k", {B, T, Hk, dk});
  q_rnorm_ = decl("q_rnorm", {B, T, Hk});
  k_rnorm_ = decl("k_rnorm", {B, T, Hk});
  o_ = decl("o", {B, T, Hv, dv});
  hidden_ = decl("hidden", {B, T, value_dim()});
  d_hidden_ = decl("grad.hidden", {B, T, value_dim()});
  d_o_ = decl("grad.o", {B, T, Hv, dv});
  d_z_ = decl("grad.z", {B, T, value_dim()});
  d_g_ = decl("grad.g", {B, T, Hv});
  d_beta_ = decl("grad.beta", {B, T, Hv});
  d_a_ = decl("grad.a", {B, T, Hv});
  d_b_ = decl("grad.b", {B, T, Hv});
  d_qkv_ = decl("grad.qkv", {B, T, conv_dim()});
  d_qkv_pre_ = decl("grad.qkv_pre", {B, T, conv_dim()});
  // On the GPU the chunked forward keeps the WY factors and the per-chunk states for the backward.
  const int64_t saved = chunk_size_ > 0 ? gdn_chunk_saved_elems(params.device(), B, T, Hk, Hv, dk, dv, chunk_size_) : 0;
  if (saved > 0) chunk_saved_ = acts.declare(p + ".chunk_saved", DType::kU16, {saved});
  // On the GPU the fp32 gradients of a and b are rounded to bf16 for their projections' GEMMs.
  if (params.act_dtype() != params.stat_dtype())
    d_gate_lowp_ = acts.declare_shared("scratch.gdn.grad.gate_input_bf16", params.act_dtype(), {B, T, Hv});
}

GdnQkL2Norm GatedDeltaNet::qk_l2norm() const {
  GdnQkL2Norm l2;
  l2.q_rnorm = act(q_rnorm_), l2.k_rnorm = act(k_rnorm_);
  l2.q_scale = 1.0 / std::sqrt(double(head_k_dim_)), l2.k_scale = 1.0;  // q takes the attention scale
  return l2;
}

void GatedDeltaNet::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  DT_CHECK(params_ && acts_, "{}: forward before declare()", prefix_);
  DT_CHECK(!ctx.grid || ctx.grid->tp_size() == tp_.size,
           "{}: built for tensor-parallel size {}, but the context's process grid has tp = {}; build the model "
           "with the grid's TpLayout", prefix_, tp_.size, ctx.grid ? ctx.grid->tp_size() : 1);
  const Shape io{B_, T_, d_model_};
  check_shape(x, io, "GatedDeltaNet input x");
  check_shape(y, io, "GatedDeltaNet output y");
  x_ = x;
  const int Hk = n_k_heads_, Hv = n_v_heads_, dk = head_k_dim_, dv = head_v_dim_;

  linear_forward(ctx, act(qkv_pre_), x, param(w_qkv_));
  linear_forward(ctx, act(z_), x, param(w_z_));
  linear_forward(ctx, act(b_), x, param(w_b_));
  linear_forward(ctx, act(a_), x, param(w_a_));
  gdn_conv_forward(ctx, act(qkv_), act(qkv_pre_), param(w_conv_));

  const Tensor qkv = act(qkv_);
  const Tensor v = gdn_head_view(qkv, 2 * key_dim(), Hv, dv);
  const Tensor q_in = gdn_head_view(qkv, 0, Hk, dk), k_in = gdn_head_view(qkv, key_dim(), Hk, dk);
  gdn_gates_forward(ctx, act(g_), act(beta_), act(a_), act(b_), param(a_log_), param(dt_bias_));
  // The l2norms taken inside the delta rule: q_, k_ and their r written for the backward.
  GdnQkL2Norm l2 = qk_l2norm();
  l2.q_hat = act(q_), l2.k_hat = act(k_);
  if (chunk_size_ > 0)
    gdn_chunk_forward(ctx, act(o_), final_state_, q_in, k_in, v, act(g_), act(beta_), Tensor{}, chunk_size_,
                      chunk_saved_ >= 0 ? act(chunk_saved_) : Tensor{}, l2);
  else
    gdn_recurrent_forward(ctx, act(o_), final_state_, q_in, k_in, v, act(g_), act(beta_), Tensor{}, l2);

  const Tensor hidden = act(hidden_);
  const Shape heads{B_, T_, Hv, dv};  // the [B, T, Hv*dv] buffers seen per value head
  gdn_norm_forward(ctx, hidden.view(heads), act(o_), act(z_).view(heads), param(w_norm_), norm_eps_);
  linear_forward(ctx, y, hidden, param(w_out_));
  tp_reduce_output(ctx, tp_, y, prefix_);
}

void GatedDeltaNet::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  DT_CHECK(x_.defined(), "{}: backward before forward", prefix_);
  DT_CHECK(ctx.device == Device::kCPU || chunk_size_ > 0,
           "{}: model.gdn.chunk_size: 0 (the token-by-token recurrence) has no GPU backward; set "
           "model.gdn.chunk_size to 64 or run with --device cpu",
           prefix_);
  const Shape io{B_, T_, d_model_};
  check_shape(dy, io, "GatedDeltaNet output gradient dy");
  check_shape(dx, io, "GatedDeltaNet input gradient dx");
  const int Hk = n_k_heads_, Hv = n_v_heads_, dk = head_k_dim_, dv = head_v_dim_;

  linear_backward(ctx, act(d_hidden_), grad(w_out_), dy, act(hidden_), param(w_out_));
  const Shape heads{B_, T_, Hv, dv};
  gdn_norm_backward(ctx, act(d_o_), act(d_z_).view(heads), grad(w_norm_), act(d_hidden_).view(heads), act(o_),
                    act(z_).view(heads), param(w_norm_), norm_eps_);

  // The delta rule writes dv straight into the v columns of d_qkv, and, taking the l2norms'
  // backward inside, dq and dk into its q and k columns.
  const Tensor d_qkv = act(d_qkv_);
  const Tensor v = gdn_head_view(act(qkv_), 2 * key_dim(), Hv, dv);
  const Tensor dq = gdn_head_view(d_qkv, 0, Hk, dk), dk_view = gdn_head_view(d_qkv, key_dim(), Hk, dk);
  const Tensor dv_view = gdn_head_view(d_qkv, 2 * key_dim(), Hv, dv);
  const GdnQkL2Norm l2 = qk_l2norm();
  if (chunk_size_ > 0)
    gdn_chunk_backward(ctx, dq, dk_view, dv_view, act(d_g_), act(d_beta_), Tensor{}, act(d_o_), Tensor{}, act(q_),
                       act(k_), v, act(g_), act(beta_), Tensor{}, chunk_size_,
                       chunk_saved_ >= 0 ? act(chunk_saved_) : Tensor{}, l2);
  else
    gdn_recurrent_backward(ctx, dq, dk_view, dv_view, act(d_g_), act(d_beta_), Tensor{}, act(d_o_), Tensor{},
                           act(q_), act(k_), v, act(g_), act(beta_), Tensor{}, l2);
  gdn_gates_backward(ctx, act(d_a_), act(d_b_), grad(a_log_), grad(dt_bias_), act(d_g_), act(d_beta_), act(a_),
                     act(b_), param(a_log_), param(dt_bias_));
  gdn_conv_backward(ctx, act(d_qkv_pre_), grad(w_conv_), d_qkv, act(qkv_pre_), param(w_conv_));

  // x feeds four projections: dx = sum of their input gradients (added by the GEMMs).
  linear_backward(ctx, dx, grad(w_qkv_), act(d_qkv_pre_), x_, param(w_qkv_));
  const std::pair<int, int> others[] = {{d_z_, w_z_}, {d_b_, w_b_}, {d_a_, w_a_}};
  for (auto [d_proj, w] : others) {
    Tensor d = act(d_proj);
    if (d.dtype != x_.dtype) {
      cast(ctx, act(d_gate_lowp_), d);
      d = act(d_gate_lowp_);
    }
    linear_backward(ctx, dx, grad(w), d, x_, param(w), 1.0, /*accumulate_dx=*/true);
  }
  tp_reduce_input_grad(ctx, tp_, dx, prefix_);
}

}  // namespace dt
