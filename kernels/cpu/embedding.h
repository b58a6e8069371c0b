// Token embedding reference.
//   forward:  y[n, :] = W[ids[n], :]                 (torch: F.embedding(ids, W))
//   backward: dW[ids[n], :] += dy[n, :]              (accumulated; repeated ids add up)
#pragma once

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace dt {

// Throws unless every id lies in [0, vocab); names the first bad position.
inline void embedding_check_ids(const int32_t* ids, int64_t n, int64_t vocab, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    DT_CHECK(ids[i] >= 0 && ids[i] < vocab,
             "{}: token id {} at position {} is outside the vocabulary [0, {}); "
             "check the tokenizer and model.vocab_size",
             what, ids[i], i, vocab);
}

template <class T>
void embedding_forward_ref(T* y, const int32_t* ids, const T* w, int64_t n, int64_t vocab, int64_t dim) {
  embedding_check_ids(ids, n, vocab, "embedding_forward");
  for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * dim, w + static_cast<int64_t>(ids[i]) * dim, dim * sizeof(T));
}

template <class T>
void embedding_backward_ref(T* dw, const T* dy, const int32_t* ids, int64_t n, int64_t vocab, int64_t dim) {
  embedding_check_ids(ids, n, vocab, "embedding_backward");
  for (int64_t i = 0; i < n; ++i) {
    T* row = dw + static_cast<int64_t>(ids[i]) * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] += dy[i * dim + d];
  }
}

}  // namespace dt
