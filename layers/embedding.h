// Token embedding, `model.embed_tokens.weight` [vocab, d_model]: y[b, t] = W[ids[b, t]].
// Not a Layer: its input is token ids, and it has no input gradient.
//
// Vocab-parallel under TP (Megatron's VocabParallelEmbedding): rank r holds rows
// [r V/tp, (r+1) V/tp); it looks up the tokens it owns, zeros the others, and the ranks' outputs are
// summed (reduce_from_tp_region). The zeros come from a copy of the local table with one zero row
// appended, which every token the rank does not own points at; the backward accumulates through the
// same extended table, so the ops need no masking.
#pragma once

#include <memory>
#include <string>

#include "core/arena.h"
#include "core/context.h"
#include "layers/model_config.h"
#include "layers/params.h"

namespace dt {

class Embedding {
 public:
  static constexpr const char* kWeightName = "model.embed_tokens.weight";

  explicit Embedding(const ModelConfig& cfg, TpLayout tp = {});

  // Declares the weight: N(0, init_std^2), vocab-parallel (split along dim 0) under TP.
  void declare(ParamStore& params);
  // ids: int32 [B, T] on the parameters' device; y: [B, T, d_model].
  void forward(Context& ctx, const Tensor& ids, const Tensor& y);
  // Accumulates dW[ids[n]] += dy[n] (for the ids of the last forward).
  void backward(Context& ctx, const Tensor& dy);

  int weight_slot() const { return w_; }

 private:
  void prepare_tp(Context& ctx, const Tensor& ids);  // the extended tables and the local ids of this batch

  int64_t vocab_, dim_;
  TpLayout tp_;
  int64_t vocab_local_;  // V / tp rows, from vocab_local_ * tp.rank
  std::unique_ptr<Arena> tp_bufs_;  // tp > 1: ext_w [V/tp + 1, dim], ext_dw (same), local_ids [n]
  int ext_w_ = -1, ext_dw_ = -1, local_ids_ = -1;
  double init_std_;
  ParamStore* params_ = nullptr;
  int w_ = -1;
  Tensor ids_;
};

}  // namespace dt
