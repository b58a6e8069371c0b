// Cross-entropy reference over logits[N, V] with int32 targets[N].
//   lse_n  = log sum_v exp(logits[n, v])          (saved for backward)
//   loss_n = lse_n - logits[n, target_n]           (the caller averages: mean over N)
//   dlogits[n, v] = grad_scale * (softmax(logits[n])_v - [v == target_n])   (written)
// torch: F.cross_entropy(logits, targets, reduction="none"); grad_scale = loss_scale / N for the mean.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace dt {

inline void cross_entropy_check_targets(const int32_t* targets, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i)
    DT_CHECK(targets[i] >= 0 && targets[i] < vocab,
             "cross_entropy: target id {} at position {} is outside the vocabulary [0, {}); "
             "check the data shards and model.vocab_size",
             targets[i], i, vocab);
}

template <class T>
void cross_entropy_forward_ref(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t n,
                               int64_t vocab) {
  cross_entropy_check_targets(targets, n, vocab);
  // Rows are independent, so threads over rows keep the result bitwise the same for any thread count.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * vocab;
    T mx = *std::max_element(row, row + vocab);
    T sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
    T l = mx + std::log(sum);
    lse[i] = l;
    losses[i] = l - row[targets[i]];
  }
}

// dlogits may alias logits.
template <class T>
void cross_entropy_backward_ref(T* dlogits, const T* logits, const T* lse, const int32_t* targets, int64_t n,
                                int64_t vocab, T grad_scale) {
  cross_entropy_check_targets(targets, n, vocab);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * vocab;
    T* drow = dlogits + i * vocab;
    for (int64_t v = 0; v < vocab; ++v) drow[v] = grad_scale * std::exp(row[v] - lse[i]);
    drow[targets[i]] -= grad_scale;
  }
}

}  // namespace dt
