// Linear layer reference, y = x W^T, with the Hugging Face weight layout W[out, in].
//   forward:  y[n, o]  = sum_i x[n, i] W[o, i]
//   backward: dx[n, i] = alpha sum_o dy[n, o] W[o, i]        (written)
//             dW[o, i] += alpha sum_n dy[n, o] x[n, i]       (accumulated)
// BLAS does the work (OpenBLAS sgemm/dgemm); rows = product of x's leading dims.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace dt {

inline void gemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                     int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void linear_forward_ref(T* y, const T* x, const T* w, int64_t rows, int64_t in, int64_t out) {
  if (rows == 0 || out == 0) return;
  gemm_ref(false, true, rows, out, in, T(1), x, in, w, in, T(0), y, out);
}

// dx may be null (no input gradient wanted); dw may be null (frozen weight).
template <class T>
void linear_backward_ref(T* dx, T* dw, const T* dy, const T* x, const T* w, int64_t rows, int64_t in,
                         int64_t out, T alpha = T(1), bool accumulate_dx = false) {
  if (dx) gemm_ref(false, false, rows, in, out, alpha, dy, out, w, in, accumulate_dx ? T(1) : T(0), dx, in);
  if (dw) gemm_ref(true, false, out, in, rows, alpha, dy, out, x, in, T(1), dw, in);
}

}  // namespace dt
