// Host-side declarations of the GPU decode kernels (infer/cuda/decode_ops.cu, decode_attention.cu)
// behind infer/decode_ops.h. Compiled by g++ and nvcc alike: raw pointers and sizes, no CUDA types.
// bf16 travels as its uint16_t bits; all arithmetic is fp32 (the RoPE angle in double). Each
// launcher checks its sizes, launches on `stream` (a cudaStream_t) and checks the launch.
//
// Positions: `pos_dev` (int32 [1] on the GPU, or null) is the new token's position; when it is
// given the kernels read it there and ignore the host `pos` (a step captured in a CUDA graph then
// runs at whatever position the counter holds at replay). Kernels clamp a device position into
// the cache (a context past the capacity is refused on the host before the step).
#pragma once

#include <cstdint>

namespace dt::decode_cuda {

// Head dims the attention kernels take: the value dim (Dv, MLA's kv_lora_rank) up to 512, the
// query / key dims (Dqk; MLA's kv_lora_rank + rope dim) up to 1024.
inline constexpr int64_t kMaxValueDim = 512;
inline constexpr int64_t kMaxKeyDim = 1024;
inline constexpr int64_t kMaxRotaryDim = 512;

// y = silu(conv of [tail, x]); tail shifted by one. x, y bf16 [N, C]; tail bf16 [N, K-1, C]
// (null when K = 1); w fp32 [C, K].
void conv_step(uint16_t* y, uint16_t* tail, const uint16_t* x, const float* w, int64_t N, int64_t C, int64_t K,
               void* stream);

// RoPE of x bf16 [rows, D] in place at the position (pos_dev or pos).
void rope(uint16_t* x, int64_t rows, int64_t D, int64_t rot, double theta, bool interleaved, int64_t pos,
          const int32_t* pos_dev, void* stream);

// cache [N, cap, row_bytes] at the position (pos_dev or pos) = src [N, row_bytes]. row_bytes even.
void cache_write(void* cache, const void* src, int64_t N, int64_t cap, int64_t row_bytes, int64_t pos,
                 const int32_t* pos_dev, void* stream);

// counter[0] += 1 (the step's last kernel: the next replay runs one position further).
void advance(int32_t* counter, void* stream);

// Splits of the positions the attention kernels use for a cache of `cap` positions, and the fp32
// workspace a call needs: per (sequence, head, split) a partial (max, sum, Dv accumulators).
int64_t attention_splits(int64_t cap);
int64_t attention_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t Dv);
int64_t mla_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t kvr);

// GQA over the first len = pos + 1 cached positions: q, o bf16 [N, H, Dqk / Dv]; k_cache bf16
// [N, cap, Hkv, Dqk]; v_cache bf16 [N, cap, Hkv, Dv]; ws fp32 of attention_workspace_elems.
void attention(uint16_t* o, const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, float* ws,
               int64_t N, int64_t cap, int64_t H, int64_t Hkv, int64_t Dqk, int64_t Dv, int64_t pos,
               const int32_t* pos_dev, float scale, void* stream);

// MLA in the latent space (infer/decode_ops.h): q_nope [N, H, dn], q_pe [N, H, dr], o [N, H, dv],
// w_kvb [H (dn + dv), kvr], c_cache [N, cap, kvr], pe_cache [N, cap, dr], all bf16; ws fp32 of
// mla_workspace_elems.
void mla_attention(uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
                   const uint16_t* c_cache, const uint16_t* pe_cache, float* ws, int64_t N, int64_t cap, int64_t H,
                   int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos, const int32_t* pos_dev,
                   float scale, void* stream);

}  // namespace dt::decode_cuda
