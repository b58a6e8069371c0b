// Host-side declarations of the cross-entropy CUDA launchers (kernels/cuda/cross_entropy.cu).
// Compiled by g++ (C++20) and nvcc (C++17) alike: plain pointers and sizes, no CUDA types
// (docs/architecture.md).
// kernels/cuda/cross_entropy_ops.cpp checks the Tensors and fills these.
#pragma once

#include <cstdint>

namespace dt::cuda {

// Logits are bf16 (raw uint16_t bits) [n, vocab], row-major with no padding; every sum in fp32.
struct CrossEntropyParams {
  int64_t n = 0, vocab = 0;
  const uint16_t* logits = nullptr;
  const int32_t* targets = nullptr;  // [n]
  float* losses = nullptr;           // [n]: forward / fused write
  float* lse = nullptr;              // [n]: forward / fused write, backward reads
  uint16_t* dlogits = nullptr;       // [n, vocab]: backward / fused write (may alias logits)
  float grad_scale = 1.f;
  // Device int: each row whose target is outside [0, vocab) lowers it to its row index (atomicMin);
  // the caller sets it to kNoBadRow first. Such a row's loss is NaN and its dlogits omit the one-hot.
  int* bad_row = nullptr;
};

inline constexpr int kNoBadRow = 0x7f7f7f7f;  // what cudaMemset(p, 0x7f, 4) writes; > any row index used

// Which kernels forward and fused run (kernels/cuda/cross_entropy.cu's header has the designs):
//   kStream  online pass, then (fused) the row re-read from L2 for dlogits; any vocab;
//   kRegs    the row held in registers (vocab <= 57344): read once, written once;
//   kTma     as kRegs, persistent, the next rows fetched by cp.async.bulk meanwhile (sm_90 code).
// A plan choice, made per call from the shapes and the device (cross_entropy_plan): kTma, the default,
// where it applies; kRegs where the device lacks sm_90 code or the shared memory for the row's ring;
// kStream for rows over 57344, for a fused dlogits not offset like the logits, and for every backward
// (which has one kernel). forward and fused give the same lse / losses bits within one variant, not
// across variants; the backward's bits do not depend on it.
//
// Tests and benchmarks compare the variants by giving a context a preferred one (test-only override,
// set_cross_entropy_variant_for_testing in kernels/cuda_ops.h); the plan applies the same fallbacks to
// it. Nothing else changes the choice: no environment variable, no process-wide setting.
enum class CrossEntropyVariant : int { kStream = 0, kRegs = 1, kTma = 2 };
inline constexpr CrossEntropyVariant kCrossEntropyVariants[] = {
    CrossEntropyVariant::kStream, CrossEntropyVariant::kRegs, CrossEntropyVariant::kTma};
inline constexpr CrossEntropyVariant kCrossEntropyDefaultVariant = CrossEntropyVariant::kTma;
const char* cross_entropy_variant_name(CrossEntropyVariant v);  // "stream", "regs", "tma"

enum class CrossEntropyPass : int { kForward = 0, kBackward = 1, kFused = 2 };
// The variant a pass runs for these params on the current device, starting from `preferred`.
CrossEntropyVariant cross_entropy_plan(const CrossEntropyParams& p, CrossEntropyPass pass,
                                       CrossEntropyVariant preferred);

// losses, lse written: fp32 max/sum over each row in one read.
void cross_entropy_forward_launch(const CrossEntropyParams& p, CrossEntropyVariant preferred, void* stream);
// dlogits = grad_scale (exp(logits - lse) - onehot(target)), from the saved lse.
void cross_entropy_backward_launch(const CrossEntropyParams& p, void* stream);
// Both: lse / losses as the forward's, then dlogits written over the logits (dlogits == logits is the
// intended use), the same bits as the backward's from that lse.
void cross_entropy_fused_launch(const CrossEntropyParams& p, CrossEntropyVariant preferred, void* stream);

}  // namespace dt::cuda
