// The whole model for one token per sequence (layers/model.h's forward with T = 1, continuing the
// DecodeState): embedding, each block (norm, mixer step, residual, norm, SwiGLU MLP, residual), the
// final norm and the LM head. The weights are read in place from the ParamStore it is given
// (Hugging Face names, whole tensors: no tensor parallelism; on the GPU the bf16 copies of the
// matrices, fp32 norm weights and GDN parameters). Activations are the weights' act_dtype() (bf16 on
// the GPU), statistics and the logits stat_dtype() (fp32 on the GPU).
//
// On the GPU the step is captured in a CUDA graph (infer/decode_graph.h) and replayed: the first
// step for a state runs op by op (it also builds the GEMM plans, which capture must not), the
// second records the step and replays it, every later one replays. Each step ends by advancing
// the state's device position counter, which the position-dependent kernels read. A new state
// (another address, size or MLA cache format) is recorded again. set_graph(false) runs every step op by op.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/context.h"
#include "infer/decode_graph.h"
#include "infer/decode_state.h"
#include "infer/l2_plan.h"
#include "infer/mixer_step.h"
#include "layers/params.h"

namespace dt {

class Decoder {
 public:
  Decoder(const ModelConfig& cfg, const ParamStore& weights, int n_seqs);
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  int n_seqs() const { return n_seqs_; }
  MixerStep& mixer(int layer) { return *blocks_.at(static_cast<size_t>(layer)).mixer; }

  // ids: host int32 [N], each sequence's token at position state.length(). Returns the logits of the
  // next token [N, vocab] (on the weights' device, stat_dtype(); valid until the next step) and
  // advances the state. With greedy_vocab > 0 the step ends with greedy decoding where the logits
  // are: the first largest of each row among ids [0, greedy_vocab) (infer/decode_ops.h
  // decode_argmax), written where the next step reads its ids (input_ids(), step_chained), inside
  // the step's CUDA graph; where the LM head is the fused GEMV (head_takes_embedding) that GEMV
  // also writes the chosen ids' embeddings, the next step's input.
  Tensor step(Context& ctx, const int32_t* ids, DecodeState& state, int64_t greedy_vocab = 0);
  // The same step on the ids (and embeddings) that the last greedy step left on the device: nothing
  // goes through the host, so the host may queue it before the last step's ids reach it. With
  // steps > 1 (greedy only, at most kMaxChainedSteps): that many greedy steps in a row, one CUDA
  // graph; step k's ids are left in chained_ids() row (k + 1) % steps, the last step's in row 0
  // (input_ids()).
  Tensor step_chained(Context& ctx, DecodeState& state, int64_t greedy_vocab = 0, int steps = 1);
  static constexpr int kMaxChainedSteps = 8;
  // The ids the next step reads, int32 [N] on the weights' device: after a greedy step, its choice.
  Tensor input_ids() const { return buf(ids_).narrow0(0, 1).view({n_seqs_}); }
  // The chained steps' ids, int32 [kMaxChainedSteps, N] (row 0 is input_ids()).
  Tensor chained_ids() const { return buf(ids_); }
  // The LM head on final-normed hidden rows hn [r, d_model] (r <= n_seqs; the prefill's last
  // position): logits [r, vocab] as step() computes them, in the same buffer.
  Tensor head(Context& ctx, const Tensor& hn);

  void set_graph(bool on) { use_graph_ = on; }
  bool graph_on() const { return use_graph_; }
  int64_t graph_replays() const { return replays_; }  // steps run by replaying the graph so far

 private:
  struct BlockWeights {
    Tensor input_norm, post_norm, gate, up, down;
    std::unique_ptr<MixerStep> mixer;
  };
  Tensor buf(int slot) const { return scratch_.get(slot); }
  // The step's ops up to the logits; with a greedy vocabulary (> 0) the LM head's GEMV may take the
  // argmax and the counter's advance too: whether it did.
  // ids: the step's input ids [N, 1]; out: where the greedy argmax writes its choice [N].
  bool body(Context& ctx, DecodeState& state, const DecodePosition& pos, int64_t greedy_vocab, const Tensor& ids,
            const Tensor& out);
  // Whether a greedy step's LM head GEMV takes the argmax and the next step's embedding (so the
  // step itself starts at the first block; step() embeds host ids before it).
  bool head_takes_embedding(Device device, int64_t greedy_vocab) const;
  struct GraphKey {
    const void* base = nullptr;
    int64_t capacity = 0;
    MlaCache mla_cache = MlaCache::kBf16;  // another layout (and other kernels) at the same address
    int64_t greedy_vocab = 0;              // the argmax recorded at the step's end (0: none)
    int steps = 1;                         // steps recorded in a row
    bool operator==(const GraphKey&) const = default;
  };

  ModelConfig cfg_;
  int n_seqs_;
  Arena scratch_;
  std::vector<BlockWeights> blocks_;
  Tensor embed_, final_norm_, lm_head_;
  L2Plan l2_;  // the step's GEMVs in order, for their prefetch
  bool use_graph_ = true;
  DecodeGraph graph_;
  GraphKey graph_key_, warm_key_;  // the state the graph was recorded for; the last state run op by op
  int64_t replays_ = 0;
  int ids_ = -1, h_ = -1, h2_ = -1, n_ = -1, m_ = -1, gate_ = -1, up_ = -1, act_ = -1, rstd_ = -1, logits_ = -1;
  int argmax_ws_ = -1;  // the LM head GEMV's argmax workspace (GPU), zeroed by the arena
};

}  // namespace dt
