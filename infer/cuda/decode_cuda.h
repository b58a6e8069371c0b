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

#include "infer/gemv_input.h"

namespace dt::cuda {

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

// out[n] = the first index of the largest of logits[n, 0 .. V) (fp32, rows ld apart; NaN never wins,
// a row of NaN gives 0): greedy decoding on the GPU, one block per row. With counter (or null):
// counter[0] += 1 as advance() does, once the kernel before has ended (the argmax ends a step).
void argmax_rows(int32_t* out, const float* logits, int64_t N, int64_t V, int64_t ld, int32_t* counter,
                 void* stream);

// ---- The fused kernels of a step for a few sequences (infer/cuda/decode_fused.cu) ----

inline constexpr int64_t kGemvMaxRows = 8;           // sequences a GEMV takes
inline constexpr int kGemvMaxSegments = 4;           // weights sharing one input
inline constexpr int64_t kGemvArgmaxMaxBlocks = 1024;  // CTAs of a GEMV with the argmax
inline constexpr int64_t kGemvArgmaxWs = 2 + 2 * kGemvMaxRows * kGemvArgmaxMaxBlocks;  // its workspace (int32)
inline constexpr int64_t kGemvMaxInputBytes = 160 * 1024;  // the input in shared memory: gemv_smem_bytes
// The GEMV's shared memory: the input x' [N, C] bf16 (16-byte aligned), then for the norm its
// weight [C] fp32.
inline constexpr int64_t gemv_smem_bytes(int64_t N, int64_t C, GemvInput in) {
  return (N * C + 7) / 8 * 16 + (in == GemvInput::kRmsNorm ? C * 4 : 0);
}

// One weight of a GEMV: w bf16 [rows, C] (16-byte aligned), y [N, rows] (fp32, or bf16 with an
// optional residual bf16 [N, rows] added before the rounding; it may be y itself). row_end: the
// running total of the rows of the segments up to this one.
// With conv_w (fp32 [rows, conv_k]) the output goes through the GDN conv step (conv_step above):
// y = silu(conv of [conv_tail, bf16(W x)]) with conv_tail bf16 [N, conv_k - 1, rows] (null when
// conv_k = 1) shifted by one; y bf16, no residual.
// settled: the residual and conv_tail were written two or more kernels before this GEMV (or by its
// own launch a step before), so they are complete when its CTAs start (launch_dependent): each
// warp reads its first row's residual, tail and conv weights before its grid wait.
struct GemvSegment {
  const uint16_t* w = nullptr;
  void* y = nullptr;
  bool y_f32 = false;
  const uint16_t* residual = nullptr;
  const float* conv_w = nullptr;
  uint16_t* conv_tail = nullptr;
  int64_t conv_k = 0;
  int64_t row_end = 0;
  bool settled = false;
};
// The GEMV's input x bf16 [N, C] (16-byte aligned, rows ldx apart, C and ldx multiples of 8) is
// taken as x' by `in` (infer/gemv_input.h; x2 in x's layout, norm_w fp32 [C]; the norm's sum of
// squares in a fixed order).
// y_s[n] = W_s x'[n] for every segment s, fp32 sums.
// l2[i] (16-byte aligned, l2_bytes[i] a multiple of 16): regions the GEMV asks L2 to fetch, the
// weights of a GEMV further on (none when n_l2 = 0).
// Greedy decoding in the GEMV (argmax_out non-null; one segment, fp32 y [N, rows]): also
// argmax_out[n] = the first index of the largest of y[n, 0 .. argmax_vocab) (NaN never wins; none:
// 0), decode_argmax's ids, and with argmax_counter, counter += 1 (decode_advance). argmax_ws int32
// [kGemvArgmaxWs]: zero before the first call, and each call leaves it zero (the CTAs' partial pairs
// and their arrival count; the last CTA to arrive merges the pairs). With argmax_embed (bf16
// [>= argmax_vocab, C], 16-byte aligned) the last CTA also writes the chosen ids' rows into
// argmax_embed_out [N, C]: the next step's input, so a greedy step needs no embedding kernel.
struct GemvParams {
  GemvSegment seg[kGemvMaxSegments];
  int n_seg = 0;
  const void* l2[kGemvMaxSegments] = {};
  int64_t l2_bytes[kGemvMaxSegments] = {};
  int n_l2 = 0;
  GemvInput in = GemvInput::kPlain;
  const uint16_t* x = nullptr;
  const uint16_t* x2 = nullptr;
  const float* norm_w = nullptr;
  float eps = 0.f;
  bool zero_centered = false;
  int64_t N = 0, C = 0, ldx = 0;
  int32_t* argmax_out = nullptr;
  int32_t* argmax_counter = nullptr;
  int32_t* argmax_ws = nullptr;
  int64_t argmax_vocab = 0;
  const uint16_t* argmax_embed = nullptr;
  uint16_t* argmax_embed_out = nullptr;
};
void gemv(const GemvParams& p, void* stream);

// The GDN token after the conv, per sequence n and value head h (key head h / (Hv / Hk)): q, k, v
// from qkv [N, ld_qkv] (q at 0, k at Hk dk, v at 2 Hk dk); q^ = bf16(q_scale q / |q|), k^ = bf16(k / |k|)
// (|x| = sqrt(sum x^2 + 1e-6)); g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b) (a, b fp32
// [N, Hv]); the delta rule on state fp32 [N, Hv, dk, dv] in place; o = bf16(S^T q^); then
// y = o rsqrt(mean o^2 + eps) norm_w silu(z) (z, y bf16 rows ld_z, ld_y apart; norm_w fp32 [dv]).
struct GdnStepParams {
  const uint16_t* qkv = nullptr;
  const uint16_t* z = nullptr;
  const float *a = nullptr, *b = nullptr, *A_log = nullptr, *dt_bias = nullptr, *norm_w = nullptr;
  float* state = nullptr;
  uint16_t* y = nullptr;
  int64_t N = 0, Hk = 0, Hv = 0, dk = 0, dv = 0, ld_qkv = 0, ld_z = 0, ld_y = 0;
  float q_scale = 1.f, eps = 1e-6f;
};
void gdn_step(const GdnStepParams& p, void* stream);

// The softmax attention layer's token before the attention, per sequence n: qg bf16 [N, H qw]
// holds each query head's hd features (then, with an output gate, its hd gate features: qw = 2 hd,
// else hd); k, v bf16 [N, Hkv hd]. Each query and key head is RMS-normed over hd (with qn_w, kn_w
// fp32 [hd]; skipped when null; rmsnorm_forward's sums, eps and zero_centered), rounded to bf16,
// then rotated (RoPE on its first `rot` features at the position, as rope()), and rounded again:
// the queries into q [N, H, hd], the keys into k_cache [N, cap, Hkv, hd] at the position, the
// values copied into v_cache likewise, and the gates into gate [N, H, hd] (when qw = 2 hd).
struct AttnPrepParams {
  const uint16_t *qg = nullptr, *k = nullptr, *v = nullptr;
  const float *qn_w = nullptr, *kn_w = nullptr;
  uint16_t *q = nullptr, *gate = nullptr, *k_cache = nullptr, *v_cache = nullptr;
  int64_t N = 0, H = 0, Hkv = 0, hd = 0, cap = 0, pos = 0;
  const int32_t* pos_dev = nullptr;
  float eps = 0.f;
  bool zero_centered = false, interleaved = false;
  int rot = 0;
  double theta = 0;
};
void attn_prep(const AttnPrepParams& p, void* stream);

// counter[0] += 1 (the step's last kernel: the next replay runs one position further).
void advance(int32_t* counter, void* stream);

// Splits of the positions the attention kernels use for a cache of `cap` positions, and the fp32
// workspace a call needs: per (sequence, head, split) a partial (max, sum, Dv accumulators).
int64_t attention_splits(int64_t cap);
int64_t attention_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t Dv);
int64_t mla_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t kvr);

// GQA over the first len = pos + 1 cached positions: q, o bf16 [N, H, Dqk / Dv]; k_cache bf16
// [N, cap, Hkv, Dqk]; v_cache bf16 [N, cap, Hkv, Dv]; ws fp32 of attention_workspace_elems.
// clusters: where a row's splits fit a thread block cluster, they merge inside it (no merge
// kernel); false always launches the merge kernel (the same bits; the tests compare the two).
void attention(uint16_t* o, const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, float* ws,
               int64_t N, int64_t cap, int64_t H, int64_t Hkv, int64_t Dqk, int64_t Dv, int64_t pos,
               const int32_t* pos_dev, float scale, void* stream, bool clusters = true);

// MLA in the latent space (infer/decode_ops.h): q_nope [N, H, dn], q_pe [N, H, dr], o [N, H, dv],
// w_kvb [H (dn + dv), kvr], c_cache [N, cap, kvr], pe_cache [N, cap, dr], all bf16; ws fp32 of
// mla_workspace_elems.
void mla_attention(uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
                   const uint16_t* c_cache, const uint16_t* pe_cache, float* ws, int64_t N, int64_t cap, int64_t H,
                   int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos, const int32_t* pos_dev,
                   float scale, void* stream);

// ---- The MLA fp8 latent cache (core/fp8.h's format; infer/cuda/mla_fp8.cu) ----

// src bf16 rows [R, kvr] (kvr a multiple of 128) quantised: row r's e4m3 bytes into q [.., kvr] and
// its block scales into scales fp32 [.., kvr / 128] at cache row (r / per) cap + p + r % per, p the
// position (pos_dev or pos) clamped into [0, cap - per]. The decode step's write: R = N, per = 1; the
// prefill's capture: R = per = T, p = 0. One CTA per (block, row); the same bytes as core/fp8.h.
void latent_quantize(uint8_t* q, float* scales, const uint16_t* src, int64_t R, int64_t per, int64_t kvr, int64_t cap,
                     int64_t pos, const int32_t* pos_dev, void* stream);
// out[i] = the e4m3 bits of x[i] (fp32, no scaling) by the conversion the cache's kernels use
// (NaN -> 0x7f, then cuda_fp8.h's satfinite round to nearest even): for the tests against core/fp8.h.
void e4m3_encode(uint8_t* out, const float* x, int64_t n, void* stream);

// mla_attention over the fp8 latent cache: c_fp8 e4m3 [N, cap, kvr] with scales fp32
// [N, cap, kvr / 128], each value read back as e4m3 * scale (exact) in fp32; the rest as mla_attention.
void mla_attention_fp8(uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
                       const uint8_t* c_fp8, const float* c_scales, const uint16_t* pe_cache, float* ws, int64_t N,
                       int64_t cap, int64_t H, int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos,
                       const int32_t* pos_dev, float scale, void* stream);

}  // namespace dt::cuda
