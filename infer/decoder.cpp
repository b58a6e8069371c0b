#include "infer/decoder.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/device.h"
#include "infer/decode_ops.h"
#include "kernels/ops.h"
#include "layers/embedding.h"
#include "layers/lm_head.h"

namespace dt {

Decoder::Decoder(const ModelConfig& cfg, const ParamStore& weights, int n_seqs)
    : cfg_(cfg), n_seqs_(n_seqs), scratch_("decode scratch", weights.device()) {
  DT_CHECK(n_seqs >= 1, "decode: the number of sequences must be >= 1, got {}", n_seqs);
  DT_CHECK(weights.tp().size == 1, "decode: the weights must be whole (tensor-parallel size 1), got tp = {}",
           weights.tp().size);
  const int64_t N = n_seqs, C = cfg.d_model, F = cfg.d_ff, V = cfg.vocab_size;
  const DType t = weights.act_dtype(), st = weights.stat_dtype();
  embed_ = weights.param(Embedding::kWeightName);
  final_norm_ = weights.param("model.norm.weight");
  lm_head_ = cfg.tie_embeddings ? embed_ : weights.param(LMHead::kWeightName);
  for (int i = 0; i < cfg.n_layers(); ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    BlockWeights b;
    b.input_norm = weights.param(p + "input_layernorm.weight");
    b.post_norm = weights.param(p + "post_attention_layernorm.weight");
    b.gate = weights.param(p + "mlp.gate_proj.weight");
    b.up = weights.param(p + "mlp.up_proj.weight");
    b.down = weights.param(p + "mlp.down_proj.weight");
    b.mixer = make_mixer_step({cfg, weights, scratch_, n_seqs, i});
    for (const std::vector<Tensor>& g : b.mixer->gemv_weights()) l2_.add(g);
    l2_.add({b.gate, b.up});
    l2_.add({b.down});
    blocks_.push_back(std::move(b));
  }
  l2_.add({lm_head_});
  ids_ = scratch_.declare("ids", DType::kI32, {kMaxChainedSteps, N});
  h_ = scratch_.declare("h", t, {N, 1, C});
  h2_ = scratch_.declare("h2", t, {N, 1, C});
  n_ = scratch_.declare("normed", t, {N, 1, C});
  m_ = scratch_.declare("mixer_out", t, {N, 1, C});
  gate_ = scratch_.declare("mlp.gate", t, {N, 1, F});
  up_ = scratch_.declare("mlp.up", t, {N, 1, F});
  act_ = scratch_.declare("mlp.h", t, {N, 1, F});
  rstd_ = scratch_.declare("rstd", st, {N});
  logits_ = scratch_.declare("logits", st, {N, V});
  argmax_ws_ = scratch_.declare("argmax_ws", DType::kI32, {std::max<int64_t>(1, decode_gemv_argmax_workspace(weights.device()))});
  scratch_.allocate();
}

Tensor Decoder::step(Context& ctx, const int32_t* ids, DecodeState& state, int64_t greedy_vocab) {
  const Tensor id = input_ids();
  device_copy(id.data, id.device, ids, Device::kCPU, id.bytes());
  if (head_takes_embedding(ctx.device, greedy_vocab)) embedding_forward(ctx, buf(h_), id, embed_);
  return step_chained(ctx, state, greedy_vocab);
}

bool Decoder::head_takes_embedding(Device device, int64_t greedy_vocab) const {
  return greedy_vocab > 0 && decode_gemv_supported(device, n_seqs_, cfg_.d_model);
}

Tensor Decoder::step_chained(Context& ctx, DecodeState& state, int64_t greedy_vocab, int steps) {
  DT_CHECK(state.n_seqs() == n_seqs_, "decode: the state holds {} sequences, the decoder {}", state.n_seqs(), n_seqs_);
  DT_CHECK(state.device() == ctx.device && scratch_.device() == ctx.device,
           "decode: the context's device differs from the state's or the weights'");
  DT_CHECK(steps >= 1 && steps <= kMaxChainedSteps && (steps == 1 || greedy_vocab > 0),
           "decode: {} steps in a row (1 to {}, more than 1 only greedy)", steps, kMaxChainedSteps);
  DT_CHECK(state.length() + steps <= state.capacity(), "decode: the context is full ({} tokens, the state's capacity)",
           state.capacity());
  auto run = [&] {
    for (int k = 0; k < steps; ++k) {
      // Step k reads row k of the chained ids and writes its choice into row (k + 1) % steps.
      const Tensor in = buf(ids_).narrow0(k, 1).view({n_seqs_, 1});
      const Tensor out = buf(ids_).narrow0((k + 1) % steps, 1).view({n_seqs_});
      const DecodePosition at{state.length() + k, state.counter()};
      if (body(ctx, state, at, greedy_vocab, in, out)) continue;  // the LM head's GEMV took the argmax and the advance
      if (greedy_vocab > 0)  // the step's last kernel: the argmax, which also advances the position
        decode_argmax(ctx, out, buf(logits_), greedy_vocab, state.counter());
      else
        decode_advance(ctx, state.counter());
    }
  };
  const GraphKey key{state.base(), state.capacity(), state.mla_cache(), greedy_vocab, steps};
  // A graph needs a stream of its own (capture refuses the legacy default stream).
  if (ctx.device != Device::kCUDA || !use_graph_ || !ctx.stream) {
    run();
  } else if (graph_.ready() && graph_key_ == key) {
    graph_.replay(ctx);
    replays_ += steps;
  } else if (warm_key_.base == key.base && warm_key_.capacity == key.capacity && warm_key_.mla_cache == key.mla_cache &&
             warm_key_.greedy_vocab == key.greedy_vocab) {  // the GEMM plans exist: record, then run the recording
    graph_.capture(ctx, run);
    graph_key_ = key;
    graph_.replay(ctx);
    replays_ += steps;
  } else {
    graph_.reset();
    run();
    warm_key_ = key;
  }
  for (int k = 0; k < steps; ++k) state.advanced();
  return buf(logits_);
}

Tensor Decoder::head(Context& ctx, const Tensor& hn) {
  DT_CHECK(hn.ndim() == 2 && hn.size(0) >= 1 && hn.size(0) <= n_seqs_ && hn.size(1) == cfg_.d_model,
           "decode: the LM head takes [rows <= {}, {}] hidden rows, got {}", n_seqs_, cfg_.d_model, hn.shape.str());
  const Tensor logits = buf(logits_).narrow0(0, hn.size(0));
  linear_forward(ctx, logits, hn, lm_head_);
  return logits;
}

bool Decoder::body(Context& ctx, DecodeState& state, const DecodePosition& pos, int64_t greedy_vocab, const Tensor& ids,
                   const Tensor& out) {
  const Tensor h = buf(h_), h2 = buf(h2_), n = buf(n_), m = buf(m_), rstd = buf(rstd_);
  const int64_t N = n_seqs_, C = cfg_.d_model, F = cfg_.d_ff;
  const Tensor h_2 = h.view({N, C}), h2_2 = h2.view({N, C}), n2 = n.view({N, C});
  const bool fused_mlp = decode_gemv_supported(ctx.device, N, C) && decode_gemv_supported(ctx.device, N, F);
  const double eps = cfg_.norm_eps;
  const bool zc = cfg_.zero_centered_norm;
  const bool head_embeds = head_takes_embedding(ctx.device, greedy_vocab);
  if (!head_embeds) embedding_forward(ctx, h, ids, embed_);  // else the last step's LM head wrote h
  for (size_t i = 0; i < blocks_.size(); ++i) {
    BlockWeights& b = blocks_[i];
    // h2 = h + mixer(norm(h))
    const StepIO io{h_2, b.input_norm, eps, zc, h2_2, n2, rstd, m.view({N, C}), &l2_};
    b.mixer->step(ctx, state.layer(static_cast<int>(i)), io, pos);
    // h = h2 + mlp(norm(h2))
    if (fused_mlp) {  // two kernels: the norm, gate and up in one GEMV; SwiGLU, down and the residual in the other
      const Tensor gate = buf(gate_).view({N, F}), up = buf(up_).view({N, F});
      decode_gemv(ctx, {{b.gate, gate, {}}, {b.up, up, {}}}, GemvIn::rmsnorm(h2_2, b.post_norm, eps, zc),
                  l2_.after(b.gate));
      // h2: written by the mixer's last kernel, before the gate and up GEMV
      decode_gemv(ctx, {GemvOut(b.down, h_2, h2_2).settled()}, GemvIn::swiglu(gate, up), l2_.after(b.down));
      continue;
    }
    rmsnorm_forward(ctx, n2, rstd, h2_2, b.post_norm, eps, zc);
    linear_forward(ctx, buf(gate_), n, b.gate);
    linear_forward(ctx, buf(up_), n, b.up);
    swiglu_forward(ctx, buf(act_), buf(gate_), buf(up_));
    linear_forward(ctx, m, buf(act_), b.down);
    residual_add(ctx, h, h2, m);
  }
  if (decode_gemv_supported(ctx.device, N, C)) {  // the final norm (and when greedy the argmax) inside the LM head's GEMV
    GemvArgmax argmax;
    if (head_embeds) argmax = {out, greedy_vocab, state.counter(), buf(argmax_ws_), embed_, h_2};
    decode_gemv(ctx, {{lm_head_, buf(logits_), {}}}, GemvIn::rmsnorm(h_2, final_norm_, eps, zc), l2_.after(lm_head_),
                argmax);
    return head_embeds;
  }
  rmsnorm_forward(ctx, n2, rstd, h_2, final_norm_, eps, zc);
  linear_forward(ctx, buf(logits_), n2, lm_head_);
  return false;
}

}  // namespace dt
