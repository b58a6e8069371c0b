// One mixer's decode step (infer/gdn_step.cpp, attn_step.cpp, mla_step.cpp): a new token per
// sequence against that layer's LayerDecodeState, and the capture of that state from a prefill.
// A step reads the weights in place (the ParamStore the engine was given) and keeps its scratch in
// the decoder's arena, shared by the layers of one kind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/context.h"
#include "infer/decode_ops.h"
#include "infer/decode_state.h"
#include "infer/l2_plan.h"
#include "layers/layer.h"
#include "layers/params.h"

namespace dt {

// A block's mixer and the residual stream around it: a step reads the normed input rmsnorm(h)
// (the block's input norm, fused into its first projections where decode_gemv takes them) and
// writes y = h + mixer(rmsnorm(h)) (the residual added by its output projection).
struct StepIO {
  Tensor h;  // [N, d_model] the residual stream before the block
  Tensor norm_w;
  double eps = 0;
  bool zero_centered = false;
  Tensor y;                  // [N, d_model] h + the mixer's output; not h
  Tensor normed, rstd, out;  // scratch for the unfused paths: [N, d_model], [N], [N, d_model]
  const L2Plan* l2 = nullptr;  // the step's GEMVs, for their prefetch (none when null)

  // The normed input as decode_gemv takes it (the norm inside the GEMV).
  GemvIn gemv_in() const { return GemvIn::rmsnorm(h, norm_w, eps, zero_centered); }
  // The normed input in `normed`, for ops that take a tensor.
  const Tensor& normalize(Context& ctx) const;
  // y = h + w x (x [N, C]): one decode_gemv where it takes N x C, else a GEMM and an add. The
  // mixer's kernels come between h's writer and this one, so the GEMV takes h as settled.
  void project_out(Context& ctx, const Tensor& w, const Tensor& x) const;
  // What the GEMV whose first weight is w prefetches into L2 (L2Plan::after).
  const std::vector<Tensor>& l2_after(const Tensor& w) const;
};

class MixerStep {
 public:
  virtual ~MixerStep() = default;
  // Before the prefill forward of this layer's mixer (the prefill Model's, B = 1): ask it to leave
  // what the forward alone does not keep (GDN: the final state, into sequence 0 of s).
  virtual void before_prefill(Layer& mixer, LayerDecodeState& s) {
    (void)mixer;
    (void)s;
  }
  // After that forward over T tokens: sequence 0 of s as decoding the T tokens one by one leaves it.
  virtual void capture(Layer& mixer, LayerDecodeState& s, int64_t T) = 0;
  // One token per sequence at position pos (= the tokens already in s): io.y = io.h + the mixer's
  // output for the normed io.h. On the GPU the step may be recorded in a CUDA graph: it launches
  // kernels only (no host copies or synchronisation), and what depends on the position reads
  // pos.counter (infer/decode_ops.h).
  virtual void step(Context& ctx, LayerDecodeState& s, const StepIO& io, const DecodePosition& pos) = 0;
  // The weights of the step's decode_gemv calls in the order it makes them, a group a call (for the
  // decoder's L2Plan).
  virtual std::vector<std::vector<Tensor>> gemv_weights() const = 0;
};

// What a step is built from. The scratch arena is allocated by the caller after every step is built;
// a step reads its scratch tensors from it only in step().
struct MixerStepEnv {
  const ModelConfig& cfg;
  const ParamStore& weights;
  Arena& scratch;
  int n_seqs;
  int layer;
};

// The step of layer env.layer's mixer kind.
std::unique_ptr<MixerStep> make_mixer_step(const MixerStepEnv& env);
std::unique_ptr<MixerStep> make_gdn_step(const MixerStepEnv& env);
std::unique_ptr<MixerStep> make_attn_step(const MixerStepEnv& env);
std::unique_ptr<MixerStep> make_mla_step(const MixerStepEnv& env);

}  // namespace dt
