#include "layers/mlp.h"

#include "kernels/ops.h"
#include "layers/tp.h"

namespace dt {

MLP::MLP(const ModelConfig& cfg, std::string prefix, TpLayout tp)
    : prefix_(std::move(prefix)),
      tp_(tp),
      gate_proj_(prefix_ + ".gate_proj", cfg.d_model, cfg.d_ff, cfg.init_std, TpSplit::kColumn, tp),
      up_proj_(prefix_ + ".up_proj", cfg.d_model, cfg.d_ff, cfg.init_std, TpSplit::kColumn, tp),
      down_proj_(prefix_ + ".down_proj", cfg.d_ff, cfg.d_model, residual_init_std(cfg), TpSplit::kRow, tp) {}

void MLP::declare(ParamStore& params, Arena& acts, int B, int T) {
  acts_ = &acts;
  gate_proj_.declare(params, acts, B, T);
  up_proj_.declare(params, acts, B, T);
  down_proj_.declare(params, acts, B, T);
  const int64_t F = gate_proj_.out_features();
  const DType dt = params.act_dtype();
  gate_ = acts.declare(prefix_ + ".gate", dt, {B, T, F});
  up_ = acts.declare(prefix_ + ".up", dt, {B, T, F});
  h_ = acts.declare(prefix_ + ".h", dt, {B, T, F});
  // Backward temporaries: one set shared by every MLP (layers run one at a time).
  dh_ = acts.declare_shared("scratch.mlp.grad.h", dt, {B, T, F});
  dgate_ = acts.declare_shared("scratch.mlp.grad.gate", dt, {B, T, F});
  dup_ = acts.declare_shared("scratch.mlp.grad.up", dt, {B, T, F});
}

void MLP::forward(Context& ctx, const Tensor& x, const Tensor& y) {
  Tensor gate = acts_->get(gate_), up = acts_->get(up_), h = acts_->get(h_);
  gate_proj_.forward(ctx, x, gate);
  up_proj_.forward(ctx, x, up);
  swiglu_forward(ctx, h, gate, up);
  down_proj_.forward(ctx, h, y);
  tp_reduce_output(ctx, tp_, y, prefix_);
}

void MLP::backward(Context& ctx, const Tensor& dy, const Tensor& dx) {
  Tensor dh = acts_->get(dh_), dgate = acts_->get(dgate_), dup = acts_->get(dup_);
  down_proj_.backward(ctx, dy, dh);
  swiglu_backward(ctx, dgate, dup, dh, acts_->get(gate_), acts_->get(up_));
  gate_proj_.backward(ctx, dgate, dx);
  up_proj_.backward_accumulate(ctx, dup, dx);
  tp_reduce_input_grad(ctx, tp_, dx, prefix_);
}

}  // namespace dt
