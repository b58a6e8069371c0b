#include "trainer/adamw.h"

#include <cmath>

namespace dt {

namespace {

template <class T>
void adamw_update(T* p, T* m, T* v, const T* g, int64_t n, double decay_factor, double b1, double b2,
                  double step_size, double bc2_sqrt, double eps) {
  for (int64_t i = 0; i < n; ++i) {
    double gi = g[i];
    m[i] = static_cast<T>(b1 * m[i] + (1.0 - b1) * gi);  // the update reads the stored moments
    v[i] = static_cast<T>(b2 * v[i] + (1.0 - b2) * gi * gi);
    double mi = m[i], vi = v[i];
    double pi = static_cast<double>(p[i]) * decay_factor;
    p[i] = static_cast<T>(pi - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

template <class T>
double sum_squares(const T* g, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

template <class T>
void scale(T* g, int64_t n, double factor) {
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<T>(g[i] * factor);
}

void require_host(const ParamStore& params, const char* what) {
  DT_CHECK(params.device() == Device::kCPU, "{}: parameters on the GPU need the CUDA backend, not built yet",
           what);
}

}  // namespace

AdamW::AdamW(ParamStore& params, AdamWConfig cfg) : params_(params), cfg_(cfg), state_("optimizer", params.device()) {
  require_host(params, "AdamW");
  for (const ParamInfo& info : params.infos()) {
    state_.declare("m/" + info.name, params.dtype(), info.shape);
    state_.declare("v/" + info.name, params.dtype(), info.shape);
  }
  state_.allocate();  // zeroed: m = v = 0 before the first step
}

void AdamW::step(double lr) {
  ++t_;
  // The scalars in double, as PyTorch computes them in Python.
  double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t_));
  double bc2_sqrt = std::sqrt(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  double step_size = lr / bc1;
  for (int s = 0; s < params_.size(); ++s) {
    const ParamInfo& info = params_.infos()[s];
    double decay_factor = info.decay ? 1.0 - lr * cfg_.weight_decay : 1.0;
    Tensor p = params_.param(s), g = params_.grad(s), ms = m(s), vs = v(s);
    int64_t n = p.numel();
    if (p.dtype == DType::kF64)
      adamw_update(p.ptr<double>(), ms.ptr<double>(), vs.ptr<double>(), g.ptr<double>(), n, decay_factor,
                   cfg_.beta1, cfg_.beta2, step_size, bc2_sqrt, cfg_.eps);
    else
      adamw_update(p.ptr<float>(), ms.ptr<float>(), vs.ptr<float>(), g.ptr<float>(), n, decay_factor, cfg_.beta1,
                   cfg_.beta2, step_size, bc2_sqrt, cfg_.eps);
  }
}

double grad_global_norm(const ParamStore& params) {
  require_host(params, "grad_global_norm");
  double s = 0;
  for (int i = 0; i < params.size(); ++i) {
    Tensor g = params.grad(i);
    s += g.dtype == DType::kF64 ? sum_squares(g.ptr<double>(), g.numel()) : sum_squares(g.ptr<float>(), g.numel());
  }
  return std::sqrt(s);
}

double clip_grad_norm(ParamStore& params, double max_norm) {
  double norm = grad_global_norm(params);
  if (max_norm <= 0) return norm;
  double factor = max_norm / (norm + 1e-6);
  if (!(factor < 1.0)) return norm;  // also leaves NaN norms to the caller
  for (int i = 0; i < params.size(); ++i) {
    Tensor g = params.grad(i);
    if (g.dtype == DType::kF64)
      scale(g.ptr<double>(), g.numel(), factor);
    else
      scale(g.ptr<float>(), g.numel(), factor);
  }
  return norm;
}

}  // namespace dt
