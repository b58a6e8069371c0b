#include "layers/embedding.h"

#include <vector>

#include "kernels/ops.h"
#include "layers/tp.h"

namespace dt {

Embedding::Embedding(const ModelConfig& cfg, TpLayout tp)
    : vocab_(cfg.vocab_size), dim_(cfg.d_model), tp_(tp), init_std_(cfg.init_std) {
  DT_CHECK(vocab_ > 0 && dim_ > 0, "embedding: vocab_size ({}) and d_model ({}) must be positive", vocab_, dim_);
  vocab_local_ = tp_local(vocab_, tp, "embedding: model.vocab_size");
}

void Embedding::declare(ParamStore& params) {
  params_ = &params;
  w_ = params.declare({kWeightName, {vocab_, dim_}, Init::kNormal, init_std_, TpSplit::kColumn, /*decay=*/true});
}

void Embedding::prepare_tp(Context& ctx, const Tensor& ids) {
  const int64_t n = ids.numel();
  if (!tp_bufs_) {
    const Tensor w = params_->param(w_), g = params_->grad(w_);
    tp_bufs_ = std::make_unique<Arena>("embedding.tp", w.device);
    ext_w_ = tp_bufs_->declare("ext_w", w.dtype, {vocab_local_ + 1, dim_});  // row V/tp stays zero
    ext_dw_ = tp_bufs_->declare("ext_dw", g.dtype, {vocab_local_ + 1, dim_});
    local_ids_ = tp_bufs_->declare("local_ids", DType::kI32, {n});
    tp_bufs_->allocate();
  }
  const Tensor local = tp_bufs_->get(local_ids_);
  DT_CHECK(local.numel() == n, "embedding: a batch of {} tokens after one of {}; one Embedding serves one batch shape",
           n, local.numel());
  // The ids go through the host (a few KB; this waits for ctx.stream, not for the device).
  std::vector<int32_t> h(static_cast<size_t>(n));
  tp_download(ctx, h.data(), ids.data, ids.bytes());
  const int64_t lo = vocab_local_ * tp_.rank;
  for (int64_t i = 0; i < n; ++i) {
    DT_CHECK(h[i] >= 0 && h[i] < vocab_, "embedding: token id {} at position {} is outside the vocabulary [0, {}); "
             "check the data shards and model.vocab_size", h[i], i, vocab_);
    const int64_t r = h[i] - lo;
    h[i] = static_cast<int32_t>(r >= 0 && r < vocab_local_ ? r : vocab_local_);  // not ours: the zero row
  }
  tp_upload(ctx, local.data, h.data(), local.bytes());
}

void Embedding::forward(Context& ctx, const Tensor& ids, const Tensor& y) {
  ids_ = ids;
  if (tp_.size == 1) {
    embedding_forward(ctx, y, ids, params_->param(w_));
    return;
  }
  prepare_tp(ctx, ids);
  const Tensor w = params_->param(w_), ext = tp_bufs_->get(ext_w_);
  tp_copy(ctx, ext.data, w.data, w.bytes());  // on ctx.stream: the weights as the last update left them
  embedding_forward(ctx, y, tp_bufs_->get(local_ids_), ext);
  tp_reduce_output(ctx, tp_, y, "embedding");
}

void Embedding::backward(Context& ctx, const Tensor& dy) {
  if (tp_.size == 1) {
    embedding_backward(ctx, params_->grad(w_), dy, ids_);
    return;
  }
  // dy is whole on every rank (reduce_from_tp_region's backward is the identity). dW += through the
  // extended table, whose extra row takes the tokens of other ranks and is dropped.
  // All on ctx.stream, in order.
  const Tensor g = params_->grad(w_), ext = tp_bufs_->get(ext_dw_);
  tp_copy(ctx, ext.data, g.data, g.bytes());
  tp_memset(ctx, static_cast<char*>(ext.data) + g.bytes(), 0, ext.bytes() - g.bytes());
  embedding_backward(ctx, ext, dy, tp_bufs_->get(local_ids_));
  tp_copy(ctx, g.data, ext.data, g.bytes());
}

}  // namespace dt
