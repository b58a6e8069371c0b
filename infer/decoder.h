// The whole model for one token per sequence (layers/model.h's forward with T = 1, continuing the
// DecodeState): embedding, each block (norm, mixer step, residual, norm, SwiGLU MLP, residual), the
// final norm and the LM head. The weights are read in place from the ParamStore it is given
// (Hugging Face names, whole tensors: no tensor parallelism).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/context.h"
#include "infer/decode_state.h"
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
  // next token [N, vocab] (on the weights' device; valid until the next step) and advances the state.
  Tensor step(Context& ctx, const int32_t* ids, DecodeState& state);

 private:
  struct BlockWeights {
    Tensor input_norm, post_norm, gate, up, down;
    std::unique_ptr<MixerStep> mixer;
  };
  Tensor buf(int slot) const { return scratch_.get(slot); }

  ModelConfig cfg_;
  int n_seqs_;
  Arena scratch_;
  std::vector<BlockWeights> blocks_;
  Tensor embed_, final_norm_, lm_head_;
  int ids_ = -1, h_ = -1, h2_ = -1, n_ = -1, m_ = -1, gate_ = -1, up_ = -1, act_ = -1, rstd_ = -1, logits_ = -1;
};

}  // namespace dt
