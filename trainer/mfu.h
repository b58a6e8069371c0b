// Model FLOPs utilisation: model FLOPs per token x tokens per second over the device's peak.
// Model FLOPs per token: 6 x (parameters used in matmuls, the LM head included, the embedding
// lookup not) + 6 x T x H x head_dim per softmax-attention layer (causal: half the 12 x ... of full
// attention; MLA likewise with its head dims). The GDN layers' delta-rule FLOPs are left out (their
// projections are counted). Used by `deltatron train`'s progress line and bench/bench_train.cpp.
#pragma once

#include "layers/model.h"

namespace dt {

// The dense bf16 peak of an H100 / H200 SXM, in TFLOP/s: the default MFU denominator.
inline constexpr double kDefaultPeakTflops = 989.0;

// Model FLOPs per token on one rank: its part of the matmuls, and its 1 / tp of the heads and of
// the tied LM head under TP.
double model_flops_per_token(const Model& model, int tp);

// The fraction of `peak_tflops` that `tokens_per_s` tokens of `flops_per_token` each make.
double mfu(double tokens_per_s, double flops_per_token, double peak_tflops = kDefaultPeakTflops);

}  // namespace dt
