#include "layers/decode_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/fp8.h"

namespace dt {

const char* mla_cache_name(MlaCache f) { return f == MlaCache::kFp8 ? "fp8" : "bf16"; }

bool mla_fp8_supported(const ModelConfig& cfg) {
  return cfg.mla.kv_lora_rank > 0 && cfg.mla.kv_lora_rank % kFp8Block == 0;
}

void check_mla_fp8(const ModelConfig& cfg) {
  DT_CHECK(mla_fp8_supported(cfg),
           "--mla-cache fp8 stores the MLA latent in blocks of {} values with one fp32 scale each, so kv_lora_rank "
           "must be a multiple of {}; this model's is {} (use --mla-cache bf16)",
           kFp8Block, kFp8Block, cfg.mla.kv_lora_rank);
}

DecodeMemory decode_memory(const ModelConfig& cfg, MlaCache mla_cache) {
  const bool fp8 = mla_cache == MlaCache::kFp8 && std::count(cfg.layers.begin(), cfg.layers.end(), MixerKind::kMla) > 0;
  if (fp8) check_mla_fp8(cfg);
  DecodeMemory m;
  for (MixerKind kind : {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla}) {
    const auto L = static_cast<int>(std::count(cfg.layers.begin(), cfg.layers.end(), kind));
    if (L == 0) continue;
    DecodeMemoryPart part;
    part.kind = kind;
    part.n_layers = L;
    switch (kind) {
      case MixerKind::kGdn: {
        const GdnConfig& g = cfg.gdn;
        const int64_t state = int64_t{g.n_v_heads} * g.head_k_dim * g.head_v_dim;
        const int64_t conv_channels = 2 * int64_t{g.n_k_heads} * g.head_k_dim + int64_t{g.n_v_heads} * g.head_v_dim;
        const int64_t tail = int64_t{g.conv_kernel - 1} * conv_channels;
        part.state_bytes = L * (state * kDecodeStateElemBytes + tail * kDecodeCacheElemBytes);
        part.formula = fmt::format(
            "L·H·d_head² = {}·{}·{}·{} elements, fp32; plus conv tails L·(K-1)·(2·Hk·dk + Hv·dv) = "
            "{}·{}·{} elements, bf16",
            L, g.n_v_heads, g.head_k_dim, g.head_v_dim, L, g.conv_kernel - 1, conv_channels);
        break;
      }
      case MixerKind::kAttn: {
        const AttnConfig& a = cfg.attn;
        const int64_t d = int64_t{a.n_kv_heads} * a.head_dim;
        part.cache_bytes_per_token = L * 2 * d * kDecodeCacheElemBytes;
        part.formula = fmt::format("2·L·t·d = 2·{}·t·{} elements (d = n_kv_heads·head_dim = {}·{}), bf16", L, d,
                                   a.n_kv_heads, a.head_dim);
        break;
      }
      case MixerKind::kMla: {
        const MlaConfig& a = cfg.mla;
        if (fp8) {  // e4m3 latent, an fp32 scale per kFp8Block, the rope key bf16
          const int64_t scales = a.kv_lora_rank / kFp8Block;
          part.cache_bytes_per_token =
              L * (int64_t{a.kv_lora_rank} + scales * 4 + int64_t{a.qk_rope_head_dim} * kDecodeCacheElemBytes);
          part.formula = fmt::format(
              "L·t·(kv_lora_rank + kv_lora_rank/{} + rope dim) = {}·t·({} fp8 e4m3 + {} fp32 scales + {} bf16) "
              "elements",
              kFp8Block, L, a.kv_lora_rank, scales, a.qk_rope_head_dim);
          break;
        }
        part.cache_bytes_per_token = L * (int64_t{a.kv_lora_rank} + a.qk_rope_head_dim) * kDecodeCacheElemBytes;
        part.formula = fmt::format("L·t·(kv_lora_rank + rope dim) = {}·t·({} + {}) elements, bf16", L,
                                   a.kv_lora_rank, a.qk_rope_head_dim);
        break;
      }
    }
    m.state_bytes_per_sequence += part.state_bytes;
    m.cache_bytes_per_token += part.cache_bytes_per_token;
    m.parts.push_back(std::move(part));
  }
  return m;
}

}  // namespace dt
