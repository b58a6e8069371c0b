// What each sequence keeps between decode steps, per layer (layers/decode_memory.h counts the same
// elements for the bf16 GPU layout):
//   gdn:  the delta rule's recurrent state, one head_k_dim x head_v_dim matrix per value head
//         [N, Hv, dk, dv], and the short convolution's tail, its last conv_kernel - 1 inputs
//         [N, K-1, 2 Hk dk + Hv dv]: constant memory, whatever the context length.
//   attn: the KV cache, keys after qk_norm and RoPE and values [N, capacity, Hkv, hd] each.
//   mla:  the latent cache, kv_a_layernorm(c_kv) [N, capacity, kv_lora_rank] and the shared
//         rotated key [N, capacity, qk_rope_head_dim]; per-head keys and values are never formed.
//         With the fp8 cache (MlaCache::kFp8, layers/decode_memory.h) the latent is fp8 e4m3
//         [N, capacity, kv_lora_rank] with fp32 scales [N, capacity, kv_lora_rank / 128]
//         (core/fp8.h), quantised as each position is written; the rotated key keeps its dtype.
// All in one arena. On the CPU everything is the parameters' dtype (fp32); on the GPU the caches and
// conv tails are bf16 (the activations' dtype) and the GDN states fp32 (the statistics' dtype), as
// layers/decode_memory.h counts them. The fp8 latent and its scales are the same bytes on both. N sequences share one position: length() tokens are in every
// sequence's context. On the GPU the state also holds that position as a device counter, which the
// decode kernels read (infer/decode_ops.h), and the attention kernels' fp32 workspace.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "layers/decode_memory.h"
#include "layers/model_config.h"

namespace dt {

struct LayerDecodeState {
  MixerKind kind = MixerKind::kGdn;
  Tensor recurrent;  // gdn [N, Hv, dk, dv]
  Tensor conv_tail;  // gdn [N, K-1, conv channels]; undefined when conv_kernel = 1
  Tensor keys, values;  // attn [N, capacity, Hkv, hd]
  Tensor latent;     // mla [N, capacity, kv_lora_rank]: the cache dtype, or f8e4m3 with the fp8 cache
  Tensor latent_scale;  // mla, fp8 cache only: fp32 [N, capacity, kv_lora_rank / 128]
  Tensor rope_key;   // mla [N, capacity, qk_rope_head_dim]
  Tensor workspace;  // attn, mla on the GPU: the attention kernels' fp32 workspace (one, shared by the layers)
};

class DecodeState {
 public:
  // Zeroed state (an empty context) for n_seqs sequences of up to `capacity` tokens each: the
  // caches and conv tails of cache_dtype, the GDN recurrent states of state_dtype; the MLA latents
  // in cache_dtype or, with mla_cache kFp8, in fp8 (check_mla_fp8 must pass: a clear error if not).
  DecodeState(const ModelConfig& cfg, int n_seqs, int64_t capacity, DType cache_dtype, DType state_dtype,
              Device device, MlaCache mla_cache = MlaCache::kBf16);
  DecodeState(const DecodeState&) = delete;
  DecodeState& operator=(const DecodeState&) = delete;

  int n_seqs() const { return n_seqs_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // tokens in the context so far (the next position)
  MlaCache mla_cache() const { return mla_cache_; }
  void set_length(int64_t n);                 // after a prefill (GPU: also writes the device counter)
  // After a step that advanced the device counter itself (decode_advance): the host's length + 1.
  void advanced();
  Device device() const { return arena_.device(); }
  // GPU: int32 [1], the device copy of length(); undefined on the CPU.
  Tensor counter() const { return counter_ >= 0 ? arena_.get(counter_) : Tensor{}; }
  // GPU: the fp32 workspace of decode_attention / mla_decode_attention for this capacity; undefined on the CPU.
  Tensor attention_workspace() const { return workspace_ >= 0 ? arena_.get(workspace_) : Tensor{}; }
  // Where the state's memory starts: with the sizes, what a captured decode step depends on.
  const void* base() const { return arena_.base(); }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  LayerDecodeState& layer(int i) { return layers_.at(static_cast<size_t>(i)); }

  // Copies sequence 0 (its state and the first length() cache positions) into every other sequence:
  // a prefill fills sequence 0 once for all the continuations of one prompt.
  void broadcast_first();
  // Copies sequence 0 of `src` (a state of the same model, capacity and formats, any number of
  // sequences) into every sequence here, and takes its length: generate prefills a state of one
  // sequence, then widens it, so that the prefill and the N sequences' caches are not held at once.
  void fill_from_first(const DecodeState& src);

  // Element counts of ONE sequence, summed over the layers, to compare with layers/decode_memory.h:
  int64_t recurrent_elements() const;        // GDN states (fp32 there)
  int64_t conv_tail_elements() const;        // GDN conv tails (bf16 there)
  int64_t cache_elements_per_token() const;  // KV and latent caches (bf16 there), fp8 scales included
  int64_t cache_bytes_per_token() const;     // the same in this state's dtypes
  size_t bytes() const { return arena_.bytes(); }  // what this state holds, all sequences (its dtypes)

 private:
  void copy_first(const DecodeState& src);
  int n_seqs_;
  int64_t capacity_;
  int64_t length_ = 0;
  MlaCache mla_cache_;
  Arena arena_;
  int counter_ = -1, workspace_ = -1;
  std::vector<LayerDecodeState> layers_;
};

}  // namespace dt
