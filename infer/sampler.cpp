#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "infer/cpu/decode_ref.h"

namespace dt {

namespace {

// The Philox stream of the sampler's draws, apart from those of parameter init (streams named by
// tensor names) by its high bits.
constexpr uint64_t kSamplerStream = 0x53414D504C450000ull;  // "SAMPLE"

// The first index of the largest logit; NaN never wins (all NaN: 0): infer/cpu/decode_ref.h's
// decode_argmax_ref, which the GPU's greedy decoding matches.
int32_t argmax(std::span<const float> logits) {
  int32_t out = 0;
  decode_argmax_ref(&out, logits.data(), 1, static_cast<int64_t>(logits.size()), 0);
  return out;
}

}  // namespace

void check_sampler_options(const SamplerOptions& o) {
  DT_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
           "--temperature = {}: give a temperature >= 0 (0: greedy, 1: the model's own distribution)", o.temperature);
  DT_CHECK(o.top_k >= 0, "--top-k = {}: give a number of tokens >= 1 to keep, or 0 for no cut", o.top_k);
  DT_CHECK(o.top_p > 0 && o.top_p <= 1, "--top-p = {}: give a probability in (0, 1] (1: no cut)", o.top_p);
}

std::vector<std::pair<int32_t, double>> sampling_distribution(std::span<const float> logits, const SamplerOptions& o) {
  check_sampler_options(o);
  DT_CHECK(!logits.empty(), "sampler: no logits");
  if (o.temperature == 0) return {{argmax(logits), 1.0}};
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = order.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  // Softmax in double over the kept tokens, from the largest logit.
  const double mx = logits[order[0]];
  std::vector<std::pair<int32_t, double>> dist;
  dist.reserve(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    const double p = std::exp((static_cast<double>(logits[order[i]]) - mx) / o.temperature);
    dist.emplace_back(order[i], p);
    sum += p;
  }
  for (auto& [id, p] : dist) p /= sum;
  if (o.top_p < 1) {  // the smallest prefix whose mass reaches top_p (at least one token)
    double mass = 0;
    size_t n = 0;
    while (n < dist.size() && (n == 0 || mass < o.top_p)) mass += dist[n++].second;
    dist.resize(n);
    for (auto& [id, p] : dist) p /= mass;
  }
  return dist;
}

int32_t sample_token(std::span<const float> logits, const SamplerOptions& o, double u) {
  const auto dist = sampling_distribution(logits, o);
  double c = 0;
  for (const auto& [id, p] : dist) {
    c += p;
    if (u < c) return id;
  }
  return dist.back().first;  // u beyond the rounded total
}

double sampler_uniform(uint64_t seed, int seq, int64_t step) {
  return philox_uniform(seed, kSamplerStream + static_cast<uint64_t>(seq), static_cast<uint64_t>(step));
}

}  // namespace dt
