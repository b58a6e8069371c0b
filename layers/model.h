// The whole language model (docs/model.md, "The whole model"):
//   h = embed_tokens(inputs); h = block_i(h) for each layer; logits = lm_head(norm(h))
//   loss = mean over the B*T tokens of cross_entropy(logits, targets)
// Parameter names are Hugging Face's (model.embed_tokens.weight, model.layers.{i}...., model.norm.weight,
// lm_head.weight unless tied). One instance serves one micro-batch shape [B, T]; all activations
// live in one arena allocated by the constructor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/block.h"
#include "layers/embedding.h"
#include "layers/lm_head.h"

namespace dt {

// Called by Model::backward when the gradients of parameter slots [first_slot, end_slot) are final
// (the backward has written its last contribution to them): the LM head's, the final norm's, each
// block's from the last to the first, then the embedding's (tied: also the LM head's). Data
// parallelism starts a gradient bucket's all-reduce from here (parallel/dp_grads.h).
using GradsReady = std::function<void(int first_slot, int end_slot)>;

class Model {
 public:
  // tp: this rank's place in its tensor-parallel group; every layer is split by head (the embedding
  // and LM head by vocabulary) and the forward and backward run the TP collectives on ctx.tp.
  Model(const ModelConfig& cfg, int B, int T, DType dtype = DType::kF32, Device device = Device::kCPU,
        TpLayout tp = {});
  // Every parameter of a model of `cfg`, whole tensors in Hugging Face's order, declared exactly as
  // the constructor declares them but with nothing allocated (a 124M model's table in microseconds).
  // The layers check the config as they do for a real model. layers/param_count.h sums it.
  static std::vector<ParamInfo> param_infos(const ModelConfig& cfg);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int batch() const { return B_; }
  int seq_len() const { return T_; }
  ParamStore& params() { return params_; }  // allocated by the constructor; this rank's parts under TP
  const ParamStore& params() const { return params_; }
  void init(uint64_t seed) { params_.init(seed); }

  // inputs, targets: host int32 [B*T]. Returns the mean cross-entropy over the B*T targets.
  double forward(Context& ctx, const int32_t* inputs, const int32_t* targets);
  // inference: the forward up to the final norm only (no LM head, no loss; inputs host int32
  // [B*T]). Returns the normed hidden states [B, T, d_model] (valid until the next forward); the
  // caller applies the LM head to the rows it needs (infer/engine.h: the prompt's last). No
  // backward() may follow it.
  Tensor forward_hidden(Context& ctx, const int32_t* inputs);
  // Backward of (loss_scale * mean loss) from the last forward; ACCUMULATES into params() grads.
  // grads_ready (optional): told which slots are final as the backward goes; pass it on the last
  // micro-batch of an accumulation only.
  void backward(Context& ctx, double loss_scale = 1.0, const GradsReady& grads_ready = {});
  Tensor logits() const { return lm_head_.logits(); }  // [B, T, vocab / tp] of the last forward
  std::string summary() const;                       // layer pattern and parameter count
  Arena& activations() { return acts_; }             // every saved activation and backward scratch
  Block& block(int i) { return *blocks_.at(static_cast<size_t>(i)); }

 private:
  // allocate = false: the parameters and activations are declared, not allocated (param_infos).
  Model(const ModelConfig& cfg, int B, int T, DType dtype, Device device, TpLayout tp, bool allocate);

  ModelConfig cfg_;
  int B_, T_;
  ParamStore params_;
  Arena acts_;
  Embedding embed_;
  std::vector<std::unique_ptr<Block>> blocks_;
  RMSNorm norm_;
  LMHead lm_head_;
  int ids_ = -1, targets_ = -1;  // int32 [B, T] on the device
  std::vector<int> hs_;          // residual stream before each block and after the last: L + 1 x [B, T, C]
  int hn_ = -1;                  // after the final norm
  int grad_a_ = -1, grad_b_ = -1;  // ping-pong gradients of the residual stream
  bool have_forward_ = false;
  // The parameter slots each part declared, [first, end): for GradsReady.
  std::pair<int, int> embed_slots_, norm_slots_, head_slots_;
  std::vector<std::pair<int, int>> block_slots_;
};

}  // namespace dt
