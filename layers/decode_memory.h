// What one sequence holds while a model decodes token by token: the per-layer state and cache that
// autoregressive generation keeps between steps. The training stack and the inference engine both
// size it here.
//
// Per layer, by mixer kind (t = tokens in the context, cache elements bf16 = 2 bytes, state fp32 = 4):
//   attn (softmax / gated GQA): the KV cache, 2 * n_kv_heads * head_dim bf16 elements per token
//        (a key and a value per KV head). Published form: 2·L·t·d elements, d = n_kv_heads·head_dim.
//   mla  (DeepSeek-V2/V3 latent attention): the compressed latent, kv_lora_rank + qk_rope_head_dim
//        bf16 elements per token (the normed c_kv and the shared rotated key, as DeepSeek caches
//        them; the per-head keys and values are re-expanded or absorbed, never cached).
//        Published form: L·t·(kv_lora_rank + qk_rope_head_dim) elements.
//   gdn  (Gated DeltaNet): independent of the context. The recurrent state S, one head_k_dim x
//        head_v_dim matrix per value head, n_v_heads * head_k_dim * head_v_dim fp32 elements; plus
//        the short convolution's tail, the last conv_kernel - 1 inputs of its channels (the q, k and
//        v projection widths, 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim), in bf16.
//        Published form: L·H·d_head² elements (the state alone).
// The MLP and norms keep nothing between tokens. Whole model, no tensor parallelism (a TP rank
// holds its heads' share).
//
// The MLA latent cache has a second format, fp8 (MlaCache::kFp8, `generate --mla-cache fp8`): the
// kv_lora_rank latent values in fp8 e4m3 (1 byte) with one fp32 scale per 128 of them
// (core/fp8.h), the rope key still bf16: kv_lora_rank + 4 kv_lora_rank / 128 + 2 qk_rope_head_dim
// bytes per token and layer (656 at 512 + 64, against 1152 in bf16). It needs kv_lora_rank a
// multiple of 128.
//
//   DecodeMemory m = decode_memory(cfg);          // or decode_memory(cfg, MlaCache::kFp8)
//   m.bytes_per_sequence(32768)   // state_bytes_per_sequence + 32768 * cache_bytes_per_token
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/model_config.h"

namespace dt {

constexpr int64_t kDecodeCacheElemBytes = 2;  // bf16 KV / latent caches and GDN conv tails
constexpr int64_t kDecodeStateElemBytes = 4;  // fp32 GDN recurrent state

// The MLA latent cache's format: kBf16, the activations' dtype (bf16 on the GPU; the CPU engine
// keeps every cache in fp32), or kFp8 (e4m3 latent with block scales, the rope key unchanged).
enum class MlaCache : uint8_t { kBf16, kFp8 };
const char* mla_cache_name(MlaCache f);  // "bf16", "fp8"
// Throws, naming --mla-cache, unless the model's MLA layers take the fp8 cache (kv_lora_rank a
// multiple of 128). The model need not have MLA layers.
void check_mla_fp8(const ModelConfig& cfg);
bool mla_fp8_supported(const ModelConfig& cfg);

// The layers of one mixer kind.
struct DecodeMemoryPart {
  MixerKind kind = MixerKind::kGdn;
  int n_layers = 0;
  int64_t state_bytes = 0;            // all these layers, independent of the context
  int64_t cache_bytes_per_token = 0;  // all these layers, per token of context
  // The published formula with this model's numbers, in elements, e.g.
  // "2·L·t·d = 2·3·t·768 elements (d = n_kv_heads·head_dim = 12·64), bf16".
  std::string formula;
};

struct DecodeMemory {
  int64_t state_bytes_per_sequence = 0;  // the context-independent part (GDN states and conv tails)
  int64_t cache_bytes_per_token = 0;     // what each token of context adds (KV and latent caches)
  std::vector<DecodeMemoryPart> parts;   // the kinds the model has, in the order gdn, attn, mla

  int64_t bytes_per_sequence(int64_t tokens) const {
    return state_bytes_per_sequence + cache_bytes_per_token * tokens;
  }
};

// mla_cache kFp8 counts the MLA layers' fp8 format (check_mla_fp8 must pass).
DecodeMemory decode_memory(const ModelConfig& cfg, MlaCache mla_cache = MlaCache::kBf16);

}  // namespace dt
