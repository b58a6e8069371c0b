#include "layers/lm_head.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "layers/embedding.h"
#include "layers/tp.h"

namespace dt {

namespace {

// A host copy in double of a statistics tensor (f32 or f64) on ctx.device; waits for ctx.stream.
std::vector<double> to_host(Context& ctx, const Tensor& t) {
  const int64_t n = t.numel();
  std::vector<double> host(n);
  if (t.dtype == DType::kF64) {
    tp_download(ctx, host.data(), t.data, n * sizeof(double));
  } else {
    std::vector<float> f(n);
    tp_download(ctx, f.data(), t.data, n * sizeof(float));
    host.assign(f.begin(), f.end());
  }
  return host;
}

// t = host, queued on ctx.stream.
void from_host(Context& ctx, const Tensor& t, const std::vector<double>& host) {
  if (t.dtype == DType::kF64) {
    tp_upload(ctx, t.data, host.data(), host.size() * sizeof(double));
  } else {
    std::vector<float> f(host.begin(), host.end());
    tp_upload(ctx, t.data, f.data(), f.size() * sizeof(float));
  }
}

}  // namespace

LMHead::LMHead(const ModelConfig& cfg, TpLayout tp)
    : vocab_(cfg.vocab_size),
      dim_(cfg.d_model),
      tp_(tp),
      vocab_local_(tp_local(cfg.vocab_size, tp, "lm_head: model.vocab_size")),
      tied_(cfg.tie_embeddings),
      init_std_(cfg.init_std) {}

void LMHead::declare(ParamStore& params, Arena& acts, int B, int T) {
  params_ = &params;
  acts_ = &acts;
  if (tied_) {
    DT_CHECK(params.contains(Embedding::kWeightName),
             "lm_head: tie_embeddings is set but {} is not declared before the LM head", Embedding::kWeightName);
    w_ = params.slot(Embedding::kWeightName);
  } else {
    w_ = params.declare({kWeightName, {vocab_, dim_}, Init::kNormal, init_std_, TpSplit::kColumn, /*decay=*/true});
  }
  // Fused only without TP: the vocab-parallel backward needs the lse of every rank first.
  fused_ = params.device() == Device::kCUDA && tp_.size == 1;
  const int64_t V = vocab_local_, N = int64_t{B} * T;
  logits_ = acts.declare("lm_head.logits", params.act_dtype(), {B, T, V});
  if (!fused_) dlogits_ = acts.declare("lm_head.grad.logits", params.act_dtype(), {B, T, V});
  lse_ = acts.declare("lm_head.lse", params.stat_dtype(), {B, T});
  losses_ = acts.declare("lm_head.losses", params.stat_dtype(), {B, T});
  if (tp_.size > 1) {
    logits_ext_ = acts.declare("lm_head.tp.logits_ext", params.act_dtype(), {B, T, V + 1});
    targets_local_ = acts.declare("lm_head.tp.targets_local", DType::kI32, {B, T});
    targets_ext_ = acts.declare("lm_head.tp.targets_ext", DType::kI32, {B, T});
    stats_ = acts.declare("lm_head.tp.stats", params.stat_dtype(), {2, N});
    gathered_ = acts.declare("lm_head.tp.stats_gathered", params.stat_dtype(), {int64_t{tp_.size} * 2 * N});
  }
}

double LMHead::forward(Context& ctx, const Tensor& x, const Tensor& targets) {
  x_ = x;
  targets_ = targets;
  if (tp_.size > 1) return forward_tp(ctx, x, targets);
  Tensor logits = acts_->get(logits_), losses = acts_->get(losses_);
  linear_forward(ctx, logits, x, params_->param(w_));
  if (fused_)
    cross_entropy_fused(ctx, losses, acts_->get(lse_), logits, targets, 1.0 / static_cast<double>(targets.numel()));
  else
    cross_entropy_forward(ctx, losses, acts_->get(lse_), logits, targets);
  // The mean, summed in double on the host.
  const std::vector<double> host = to_host(ctx, losses);
  double sum = 0;
  for (double l : host) sum += l;
  return host.empty() ? 0.0 : sum / static_cast<double>(host.size());
}

double LMHead::forward_tp(Context& ctx, const Tensor& x, const Tensor& targets) {
  Communicator& tp = tp_group(ctx, tp_, "lm_head");
  const int64_t n = targets.numel(), V = vocab_local_, lo = V * tp_.rank;
  // Targets as this rank's columns: for the loss, 0 when not owned (its value is not used); for the
  // backward, the extra column V when not owned (its onehot lands there and is dropped).
  std::vector<int32_t> t(n), local(n), ext(n);
  tp_download(ctx, t.data(), targets.data, targets.bytes());
  owner_.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    DT_CHECK(t[i] >= 0 && t[i] < vocab_, "cross_entropy: target id {} at position {} is outside the vocabulary "
             "[0, {}); check the data shards and model.vocab_size", t[i], i, vocab_);
    const int64_t r = t[i] - lo;
    const bool own = r >= 0 && r < V;
    local[i] = static_cast<int32_t>(own ? r : 0);
    ext[i] = static_cast<int32_t>(own ? r : V);
    owner_[i] = static_cast<int32_t>(t[i] / V);
  }
  const Tensor tl = acts_->get(targets_local_), te = acts_->get(targets_ext_);
  tp_upload(ctx, tl.data, local.data(), tl.bytes());
  tp_upload(ctx, te.data, ext.data(), te.bytes());

  const Tensor logits = acts_->get(logits_), losses = acts_->get(losses_), lse = acts_->get(lse_);
  linear_forward(ctx, logits, x, params_->param(w_));
  cross_entropy_forward(ctx, losses, lse, logits, tl);  // local lse; lse - logit[local] on the owner
  const Tensor stats = acts_->get(stats_), gathered = acts_->get(gathered_);
  tp_copy(ctx, stats.data, lse.data, lse.bytes());  // on ctx.stream, which the collective waits for
  tp_copy(ctx, static_cast<char*>(stats.data) + lse.bytes(), losses.data, losses.bytes());
  tp.all_gather(gathered, stats);
  const std::vector<double> all = to_host(ctx, gathered);  // [rank][lse | loss][token]
  std::vector<double> lse_all(n), loss(n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY;
    for (int r = 0; r < tp_.size; ++r) m = std::max(m, all[(2 * r) * n + i]);
    double s = 0;
    for (int r = 0; r < tp_.size; ++r) s += std::exp(all[(2 * r) * n + i] - m);
    lse_all[i] = m + std::log(s);
    const int o = owner_[i];
    const double target_logit = all[(2 * o) * n + i] - all[(2 * o + 1) * n + i];
    loss[i] = lse_all[i] - target_logit;
    sum += loss[i];
  }
  from_host(ctx, lse, lse_all);  // the backward's softmax normalises over the whole vocabulary
  from_host(ctx, losses, loss);
  return n ? sum / static_cast<double>(n) : 0.0;
}

void LMHead::backward(Context& ctx, double loss_scale, const Tensor& dx) {
  if (fused_) {  // the forward left dlogits / N in the logits buffer
    linear_backward(ctx, dx, params_->grad(w_), acts_->get(logits_), x_, params_->param(w_), loss_scale);
    return;
  }
  const double grad_scale = loss_scale / static_cast<double>(targets_.numel());
  if (tp_.size > 1) return backward_tp(ctx, grad_scale, dx);
  Tensor logits = acts_->get(logits_), dlogits = acts_->get(dlogits_);
  cross_entropy_backward(ctx, dlogits, logits, acts_->get(lse_), targets_, grad_scale);
  linear_backward(ctx, dx, params_->grad(w_), dlogits, x_, params_->param(w_));
}

void LMHead::backward_tp(Context& ctx, double grad_scale, const Tensor& dx) {
  const Tensor logits = acts_->get(logits_), dlogits = acts_->get(dlogits_), ext = acts_->get(logits_ext_);
  const int64_t n = targets_.numel();
  const size_t es = dtype_size(logits.dtype), width = static_cast<size_t>(vocab_local_) * es, pitch = width + es;
  // ext[:, :V] = logits; the extra column holds whatever finite value it last had (it is dropped).
  // The copies go on ctx.stream between the kernels.
  tp_copy_rows(ctx, ext.data, pitch, logits.data, width, width, n);
  // In place: dlogits = grad_scale * (exp(logits - lse) - onehot), lse over the whole vocabulary.
  cross_entropy_backward(ctx, ext, ext, acts_->get(lse_), acts_->get(targets_ext_), grad_scale);
  tp_copy_rows(ctx, dlogits.data, width, ext.data, pitch, width, n);
  linear_backward(ctx, dx, params_->grad(w_), dlogits, x_, params_->param(w_));
  tp_reduce_input_grad(ctx, tp_, dx, "lm_head");  // x entered the column-parallel LM head whole
}

Tensor LMHead::logits() const {
  DT_CHECK(!fused_, "lm_head: the logits are not kept on the GPU (the fused cross-entropy overwrites them with "
           "their gradient); run on the CPU to read them");
  return acts_->get(logits_);
}

}  // namespace dt
