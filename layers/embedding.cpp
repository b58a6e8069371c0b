#include "layers/embedding.h"

#include "kernels/ops.h"

namespace dt {

Embedding::Embedding(const ModelConfig& cfg)
    : vocab_(cfg.vocab_size), dim_(cfg.d_model), init_std_(cfg.init_std) {
  DT_CHECK(vocab_ > 0 && dim_ > 0, "embedding: vocab_size ({}) and d_model ({}) must be positive", vocab_, dim_);
}

void Embedding::declare(ParamStore& params) {
  params_ = &params;
  w_ = params.declare({kWeightName, {vocab_, dim_}, Init::kNormal, init_std_, TpSplit::kColumn, /*decay=*/true});
}

void Embedding::forward(Context& ctx, const Tensor& ids, const Tensor& y) {
  ids_ = ids;
  embedding_forward(ctx, y, ids, params_->param(w_));
}

void Embedding::backward(Context& ctx, const Tensor& dy) { embedding_backward(ctx, params_->grad(w_), dy, ids_); }

}  // namespace dt
