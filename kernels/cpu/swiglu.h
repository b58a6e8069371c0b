// Elementwise references: the SwiGLU product, the sigmoid output gate of
// Qwen3.5 attention, and the residual add.
//   swiglu:       h = silu(gate) * up,  silu(g) = g * sigmoid(g)
//                 dgate = dh * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  dup = dh * silu(g)
//   sigmoid gate: y = x * sigmoid(g)               (torch: attn_output * torch.sigmoid(gate))
//                 dx = dy * sigmoid(g),  dg = dy * x * sigmoid(g) * (1 - sigmoid(g))
//   residual add: y = a + b
// Every output may alias an input of the same element (each element is read before it is written).
#pragma once

#include <cmath>
#include <cstdint>

namespace dt {

template <class T>
inline T sigmoid_ref(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void swiglu_forward_ref(T* h, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = gate[i] * sigmoid_ref(gate[i]) * up[i];
}

template <class T>
void swiglu_backward_ref(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T g = gate[i], u = up[i], d = dh[i];
    T s = sigmoid_ref(g);
    dgate[i] = d * u * s * (T(1) + g * (T(1) - s));
    dup[i] = d * g * s;
  }
}

template <class T>
void sigmoid_gate_forward_ref(T* y, const T* x, const T* g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid_ref(g[i]);
}

template <class T>
void sigmoid_gate_backward_ref(T* dx, T* dg, const T* dy, const T* x, const T* g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T s = sigmoid_ref(g[i]), d = dy[i], xv = x[i];
    dx[i] = d * s;
    dg[i] = d * xv * s * (T(1) - s);
  }
}

template <class T>
void residual_add_ref(T* y, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace dt
