// Picking the next token from logits: greedy (temperature 0) or sampled from
// softmax(logits / temperature) cut to the top_k most likely tokens and then to the smallest set
// whose probability reaches top_p (nucleus), renormalised. The randomness is a Philox draw
// (core/philox.h) per (seed, sequence, step), so a seed gives the same tokens on every machine
// that computes the same logits; ties between equal logits go to the lower id.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace dt {

struct SamplerOptions {
  double temperature = 0.0;  // 0: greedy (argmax); > 0: sample
  int top_k = 0;             // 0: no cut
  double top_p = 1.0;        // in (0, 1]; 1: no cut
};

// Throws dt::Error naming the flag (--temperature, --top-k, --top-p) when an option is out of range.
void check_sampler_options(const SamplerOptions& o);

// The distribution sample_token draws from: (token id, probability) by decreasing probability (ties:
// lower id first), only the tokens kept by top_k / top_p; probabilities sum to 1. Greedy: one token.
std::vector<std::pair<int32_t, double>> sampling_distribution(std::span<const float> logits, const SamplerOptions& o);

// A token from `logits`, with u uniform in (0, 1) choosing along the cumulative distribution.
int32_t sample_token(std::span<const float> logits, const SamplerOptions& o, double u);

// The uniform draw for sequence `seq` at decode step `step` under `seed`.
double sampler_uniform(uint64_t seed, int seq, int64_t step);

}  // namespace dt
