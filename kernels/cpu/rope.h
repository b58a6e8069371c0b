// Rotary position embedding reference on x[B, S, H, D], position of token (b, t) = t.
// Only the first `rot` dims of each head rotate (partial rotary); the rest pass through.
// With half = rot / 2 and, for i < half,
//   inv_freq_i = 1 / theta^(2i / rot),   angle = t * inv_freq_i,   c = cos(angle), s = sin(angle)
//
// Rotate-half (Llama / Qwen3.5, HF apply_rotary_pos_emb):
//   y[i]        = x[i] c        - x[half+i] s
//   y[half + i] = x[half+i] c   + x[i] s
// Interleaved (DeepSeek-V3 with rope_interleave, HF apply_rotary_pos_emb_interleave): the pairs
// are adjacent, x[2i], x[2i+1]; HF first de-interleaves them (view(d/2, 2).transpose), then
// applies rotate-half, so the OUTPUT is in the de-interleaved order:
//   y[i]        = x[2i] c   - x[2i+1] s
//   y[half + i] = x[2i+1] c + x[2i] s
// Backward is the inverse rotation (angle -> -angle) written back to the input positions.
//
// cos/sin are computed in T the way HF computes them in float32 (inv_freq, then t * inv_freq),
// so the float reference matches HF's float32 model.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dt {

namespace rope_detail {

// cos/sin tables [S, half].
template <class T>
void tables(std::vector<T>& cos_t, std::vector<T>& sin_t, int64_t S, int64_t rot, double theta) {
  int64_t half = rot / 2;
  cos_t.resize(S * half);
  sin_t.resize(S * half);
  for (int64_t i = 0; i < half; ++i) {
    T inv_freq = T(1) / std::pow(T(theta), T(2 * i) / T(rot));
    for (int64_t t = 0; t < S; ++t) {
      T angle = T(t) * inv_freq;
      cos_t[t * half + i] = std::cos(angle);
      sin_t[t * half + i] = std::sin(angle);
    }
  }
}

}  // namespace rope_detail

// y may alias x.
template <class T>
void rope_forward_ref(T* y, const T* x, int64_t B, int64_t S, int64_t H, int64_t D, int64_t rot, double theta,
                      bool interleaved) {
  std::vector<T> cos_t, sin_t, tmp(rot);
  rope_detail::tables(cos_t, sin_t, S, rot, theta);
  int64_t half = rot / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const T* xr = x + ((b * S + t) * H + h) * D;
        T* yr = y + ((b * S + t) * H + h) * D;
        for (int64_t i = 0; i < rot; ++i) tmp[i] = xr[i];
        for (int64_t d = rot; d < D; ++d) yr[d] = xr[d];
        for (int64_t i = 0; i < half; ++i) {
          T c = cos_t[t * half + i], s = sin_t[t * half + i];
          T x1 = interleaved ? tmp[2 * i] : tmp[i];
          T x2 = interleaved ? tmp[2 * i + 1] : tmp[half + i];
          yr[i] = x1 * c - x2 * s;
          yr[half + i] = x2 * c + x1 * s;
        }
      }
}

// dx may alias dy.
template <class T>
void rope_backward_ref(T* dx, const T* dy, int64_t B, int64_t S, int64_t H, int64_t D, int64_t rot, double theta,
                       bool interleaved) {
  std::vector<T> cos_t, sin_t, tmp(rot);
  rope_detail::tables(cos_t, sin_t, S, rot, theta);
  int64_t half = rot / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const T* dyr = dy + ((b * S + t) * H + h) * D;
        T* dxr = dx + ((b * S + t) * H + h) * D;
        for (int64_t i = 0; i < rot; ++i) tmp[i] = dyr[i];
        for (int64_t d = rot; d < D; ++d) dxr[d] = dyr[d];
        for (int64_t i = 0; i < half; ++i) {
          T c = cos_t[t * half + i], s = sin_t[t * half + i];
          T d1 = tmp[i], d2 = tmp[half + i];
          T g1 = d1 * c + d2 * s;   // d/dx1
          T g2 = -d1 * s + d2 * c;  // d/dx2
          if (interleaved) {
            dxr[2 * i] = g1;
            dxr[2 * i + 1] = g2;
          } else {
            dxr[i] = g1;
            dxr[half + i] = g2;
          }
        }
      }
}

}  // namespace dt
