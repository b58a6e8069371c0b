// LM head and loss: logits = x W^T with W = `lm_head.weight` [vocab, d_model], or the embedding
// `model.embed_tokens.weight` when cfg.tie_embeddings; loss = mean over the B*T tokens of
// cross_entropy(logits, targets)  (torch: F.cross_entropy(logits.view(-1, V), targets.view(-1))).
// x is the output of the final norm (the Model applies it).
//
// On the GPU the forward runs the cross-entropy's forward and backward in one pass over the bf16
// logits (cross_entropy_fused), which then hold dlogits / N: fp32 logits never exist, and the
// backward is two GEMMs scaled by loss_scale. logits() is then not available.
//
// Vocab-parallel under TP (Megatron's vocab_parallel_cross_entropy), the weight split as the
// embedding's: each rank computes its logits [B, T, V/tp] and their log-sum-exp and target logit;
// the ranks' lse and loss per token are all-gathered (2 numbers a token, never the logits), giving
// lse = logsumexp over the ranks' lse and loss = lse - (target logit, from the rank that owns the
// target). The backward, dlogits = (softmax - onehot) / N, is local: the cross-entropy op runs on
// the logits with one extra column, which the target points at on the ranks that do not own it.
#pragma once

#include <vector>

#include "core/context.h"
#include "layers/model_config.h"
#include "layers/params.h"

namespace dt {

class LMHead {
 public:
  static constexpr const char* kWeightName = "lm_head.weight";

  explicit LMHead(const ModelConfig& cfg, TpLayout tp = {});

  // Declares lm_head.weight (vocab-parallel under TP), or, when tied, looks up the embedding,
  // which must be declared already.
  void declare(ParamStore& params, Arena& acts, int B, int T);
  // x [B, T, d_model], targets int32 [B, T] (on the parameters' device). Returns the mean loss.
  double forward(Context& ctx, const Tensor& x, const Tensor& targets);
  // Backward of loss_scale * (mean loss): writes dx [B, T, d_model], accumulates dW.
  void backward(Context& ctx, double loss_scale, const Tensor& dx);

  Tensor logits() const;  // [B, T, vocab / tp] of the last forward (CPU only): this rank's columns
  int weight_slot() const { return w_; }

 private:
  double forward_tp(Context& ctx, const Tensor& x, const Tensor& targets);
  void backward_tp(Context& ctx, double grad_scale, const Tensor& dx);

  int64_t vocab_, dim_;
  TpLayout tp_;
  int64_t vocab_local_;
  bool tied_;
  double init_std_;
  ParamStore* params_ = nullptr;
  Arena* acts_ = nullptr;
  int w_ = -1, logits_ = -1, lse_ = -1, losses_ = -1, dlogits_ = -1;
  bool fused_ = false;  // GPU: dlogits computed by the forward, in place of the logits
  // tp > 1: logits with the extra column [B, T, V/tp + 1], targets as local columns (0 / the extra
  // column when not owned) [B, T], this rank's [lse | loss] [2, B*T], every rank's [tp, 2, B*T].
  int logits_ext_ = -1, targets_local_ = -1, targets_ext_ = -1, stats_ = -1, gathered_ = -1;
  std::vector<int32_t> owner_;  // per token: the rank that owns its target
  Tensor x_, targets_;
};

}  // namespace dt
