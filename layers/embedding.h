// Token embedding, `model.embed_tokens.weight` [vocab, d_model]: y[b, t] = W[ids[b, t]].
// Not a Layer: its input is token ids, and it has no input gradient.
#pragma once

#include <string>

#include "core/context.h"
#include "layers/model_config.h"
#include "layers/params.h"

namespace dt {

class Embedding {
 public:
  static constexpr const char* kWeightName = "model.embed_tokens.weight";

  explicit Embedding(const ModelConfig& cfg);

  // Declares the weight: N(0, init_std^2), vocab-parallel (split along dim 0) under TP.
  void declare(ParamStore& params);
  // ids: int32 [B, T] on the parameters' device; y: [B, T, d_model].
  void forward(Context& ctx, const Tensor& ids, const Tensor& y);
  // Accumulates dW[ids[n]] += dy[n] (for the ids of the last forward).
  void backward(Context& ctx, const Tensor& dy);

  int weight_slot() const { return w_; }

 private:
  int64_t vocab_, dim_;
  double init_std_;
  ParamStore* params_ = nullptr;
  int w_ = -1;
  Tensor ids_;
};

}  // namespace dt
