// Generation from a trained model: a chunked prefill of the prompt, then token-by-token decode.
//
//   Engine engine(cfg, model.params());            // weights loaded (e.g. from a checkpoint)
//   GenerateResult r = engine.generate(ctx, prompt_ids, options, on_token);
//
// The prefill runs the normal Model forward (layers/model.h) with B = 1, T = the prompt's length
// (GDN: the chunked delta rule) and captures from it the state decoding the prompt token by token
// would leave (infer/decode_state.h); every sequence of a batch starts from that one prefill. The
// decode then runs infer/decoder.h one token per sequence, the N sequences together.
//
// Devices: the CPU (fp32 throughout) and the GPU (bf16 activations and caches, fp32 GDN states and
// logits; fp32 sums everywhere). The prefill is the model's own forward up to the final norm
// (Model::forward_hidden) with the decoder's LM head on the last position, so the first token's
// logits come out as every later step's do. On the GPU each decode step after the first is a CUDA
// graph replay (infer/decoder.h); set_cuda_graph(false) / GenerateOptions::cuda_graph = false runs
// it op by op (same kernels, same tokens). Sampling is on the host from the step's fp32 logits, the
// same code on both devices, except greedy decoding (temperature 0) without a logits callback,
// which takes each row's largest logit where the logits are and copies back only the ids.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/context.h"
#include "infer/decode_state.h"
#include "infer/decoder.h"
#include "infer/sampler.h"
#include "layers/params.h"

namespace dt {

// Called with each row of logits computed for the first sequence: `position` is the index in the
// context (prompt, then generated tokens fed back) of the token whose logits `row` (vocab floats) are,
// i.e. the distribution of the token at position + 1. The prompt's rows come from the prefill, in
// order, then one row per decode step. For checks against another implementation (scripts/hf_check.py).
using LogitsCallback = std::function<void(int64_t position, std::span<const float> row)>;

struct GenerateOptions {
  int max_new_tokens = 64;
  int batch = 1;  // sequences sampled from the same prompt
  uint64_t seed = 0;
  SamplerOptions sampling;
  std::vector<int32_t> stop_tokens;  // a sequence ends after producing one of them (not included)
  int32_t vocab_limit = 0;           // sample among ids [0, vocab_limit) only; 0: the whole vocabulary
  LogitsCallback on_logits;          // optional: sequence 0's logits at every position
  bool cuda_graph = true;            // GPU: replay each decode step from a CUDA graph (false: op by op)
  MlaCache mla_cache = MlaCache::kBf16;  // the MLA latent cache's format (infer/decode_state.h)
};

enum class StopReason { kLength, kStopToken, kCaller };
const char* stop_reason_name(StopReason r);  // "length", "stop_token", "stop_text"

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // per sequence, the generated tokens (no stop token)
  std::vector<StopReason> stop;              // per sequence
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;  // the prefill, to the first token's logits
  double decode_ms = 0;   // the decode steps after it
  // The steps after the second and after any that ran with it (the first builds the GEMM plans, the
  // second records the CUDA graph; greedy steps 2 to 9 are one graph): the rate a long generation
  // runs at. 0 when there were no such steps.
  double steady_decode_ms = 0;
  int64_t steady_decode_tokens = 0;
  int64_t decode_steps = 0;   // decoder steps run (each advances every sequence)
  int64_t decode_tokens = 0;  // tokens those steps produced for sequences still going
  int64_t graph_replays = 0;  // GPU: decode steps run as a CUDA graph replay
  size_t state_bytes = 0;     // the decode state's allocation, all sequences (caches at full capacity)
  // GPU: the device's used memory (core/device.h) just before the state is allocated, right after
  // the prefill (the prefill's model freed, the N sequences' state filled) and after the last step
  // (the recorded step graph included): the larger of the last two minus the first is what decoding
  // holds beyond the weights. 0 on the CPU.
  size_t device_used_before = 0, device_used_after_prefill = 0, device_used_after_decode = 0;
};

// Called as each token is produced: (sequence, token). Returning false ends that sequence there
// (the token is kept): a caller's stop text.
using TokenCallback = std::function<bool(int seq, int32_t token)>;

class Engine {
 public:
  // weights: a whole model's parameters (no tensor parallelism), kept by reference.
  Engine(const ModelConfig& cfg, ParamStore& weights);
  const ModelConfig& config() const { return cfg_; }

  // A zeroed state (empty context) of n_seqs sequences of up to `capacity` tokens; the MLA latent
  // cache in the activations' dtype or fp8 (infer/decode_state.h).
  std::unique_ptr<DecodeState> new_state(int n_seqs, int64_t capacity, MlaCache mla_cache = MlaCache::kBf16) const;
  // The prompt through the chunked forward; leaves every sequence of `state` (which must be empty)
  // as if the prompt had been decoded token by token. Returns the last prompt token's logits [vocab];
  // all_logits (optional) receives every prompt position's, [T * vocab].
  std::vector<float> prefill(Context& ctx, std::span<const int32_t> prompt, DecodeState& state,
                             std::vector<float>* all_logits = nullptr);
  // One token per sequence (ids [N]) at position state.length(); returns the logits [N * vocab].
  std::vector<float> step(Context& ctx, std::span<const int32_t> ids, DecodeState& state);

  // GPU: record each decode step in a CUDA graph and replay it (the default), or run it op by op.
  void set_cuda_graph(bool on) { cuda_graph_ = on; }
  int64_t graph_replays() const { return decoder_ ? decoder_->graph_replays() : 0; }

  GenerateResult generate(Context& ctx, std::span<const int32_t> prompt, const GenerateOptions& options,
                          const TokenCallback& on_token = {});

 private:
  Decoder& decoder(int n_seqs);
  void check_prompt(std::span<const int32_t> prompt) const;

  ModelConfig cfg_;
  ParamStore& weights_;
  std::unique_ptr<Decoder> decoder_;  // for the last number of sequences
  bool cuda_graph_ = true;
};

}  // namespace dt
