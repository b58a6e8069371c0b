// Dispatch of infer/decode_ops.h: shape checks, then the GPU kernels (infer/cuda/decode_cuda.h)
// or the CPU references (infer/cpu/decode_ref.h).
#include "infer/decode_ops.h"

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/fp8.h"
#include "infer/cpu/decode_ref.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"
#ifdef DELTATRON_HAVE_CUDA
#include "infer/cuda/decode_cuda.h"
#endif

namespace dt {

namespace {

// Past the GPU branch: a CUDA context here means this build has no CUDA backend.
void require_cpu(const Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCPU, "{}: this build has no CUDA backend (nvcc was not found at configure time)",
           op);
}

#ifdef DELTATRON_HAVE_CUDA
bool on_gpu(const Context& ctx) { return ctx.device == Device::kCUDA; }

// The GPU tensors of an op: on the GPU, of `dtype`, contiguous.
void check_gpu(const char* op, DType dtype, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (auto [name, t] : ts) {
    DT_CHECK(t->defined(), "{}: {} is not given", op, name);
    DT_CHECK(t->device == Device::kCUDA && t->dtype == dtype && t->is_contiguous(),
             "{}: {} {} must be a contiguous {} tensor on the GPU", op, name, t->str(), dtype_name(dtype));
  }
}

// The device counter's pointer (null when undefined), checked.
const int32_t* counter_ptr(const char* op, const DecodePosition& pos) {
  if (!pos.counter.defined()) return nullptr;
  DT_CHECK(pos.counter.device == Device::kCUDA && pos.counter.dtype == DType::kI32 && pos.counter.numel() == 1,
           "{}: the position counter {} must be int32 [1] on the GPU", op, pos.counter.str());
  return pos.counter.ptr<int32_t>();
}

void check_workspace(const char* op, const Tensor& ws, int64_t elems, DType dtype = DType::kF32) {
  DT_CHECK(ws.defined() && ws.device == Device::kCUDA && ws.dtype == dtype && ws.is_contiguous() && ws.numel() >= elems,
           "{}: the GPU needs a contiguous {} workspace of at least {} elements, got {}", op, dtype_name(dtype), elems,
           ws.defined() ? ws.str() : std::string("none"));
}

uint16_t* bf16(const Tensor& t) { return static_cast<uint16_t*>(t.data); }
#endif


void check_tensors(const char* op, DType dtype, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (auto [name, t] : ts) {
    DT_CHECK(t->defined(), "{}: {} is not given", op, name);
    DT_CHECK(t->dtype == dtype, "{}: {} is {}, expected {}", op, name, t->str(), dtype_name(dtype));
    DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, name, t->str());
  }
}

template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  if (t == DType::kF32) return f(float{});
  if (t == DType::kF64) return f(double{});
  DT_FAIL("{}: dtype {} not supported on the CPU (f32 or f64)", op, dtype_name(t));
}

}  // namespace

void decode_conv_step(Context& ctx, const Tensor& y, const Tensor& tail, const Tensor& x, const Tensor& w) {
  const char* op = "decode_conv_step";
  DT_CHECK(x.ndim() == 2 && w.ndim() == 3 && w.size(1) == 1 && w.size(0) == x.size(1),
           "{}: x {} must be [N, C] and w {} [C, 1, K]", op, x.shape.str(), w.shape.str());
  const int64_t N = x.size(0), C = x.size(1), K = w.size(2);
  check_shape(y, {N, C}, "decode_conv_step y");
  if (K > 1) check_shape(tail, {N, K - 1, C}, "decode_conv_step tail");
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"y", &y}, {"x", &x}});
    if (K > 1) check_gpu(op, DType::kBF16, {{"tail", &tail}});
    check_gpu(op, DType::kF32, {{"w", &w}});
    return cuda::conv_step(bf16(y), K > 1 ? bf16(tail) : nullptr, bf16(x), w.ptr<float>(), N, C, K, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  check_tensors(op, x.dtype, {{"y", &y}, {"x", &x}, {"w", &w}});
  if (K > 1) check_tensors(op, x.dtype, {{"tail", &tail}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    decode_conv_step_ref<T>(y.ptr<T>(), K > 1 ? tail.ptr<T>() : nullptr, x.ptr<T>(), w.ptr<T>(), N, C, K);
  });
}

void decode_rope(Context& ctx, const Tensor& x, const DecodePosition& pos, int64_t rotary_dim, double theta,
                 bool interleaved) {
  const char* op = "decode_rope";
  DT_CHECK(x.ndim() == 3, "{}: x {} must be [N, H, D]", op, x.shape.str());
  DT_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= x.size(2) && pos.host >= 0,
           "{}: rotary_dim {} must be even and <= D of x {}, pos {} >= 0", op, rotary_dim, x.shape.str(), pos.host);
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"x", &x}});
    return cuda::rope(bf16(x), x.size(0) * x.size(1), x.size(2), rotary_dim, theta, interleaved, pos.host,
                             counter_ptr(op, pos), ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  check_tensors(op, x.dtype, {{"x", &x}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    decode_rope_ref<T>(x.ptr<T>(), x.size(0), x.size(1), x.size(2), pos.host, rotary_dim, theta, interleaved);
  });
}

void decode_attention(Context& ctx, const Tensor& o, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const DecodePosition& pos, double scale, const Tensor& workspace) {
  const char* op = "decode_attention";
  (void)workspace;  // GPU only
  const int64_t len = pos.host + 1;
  DT_CHECK(q.ndim() == 3 && k_cache.ndim() == 4 && v_cache.ndim() == 4,
           "{}: q {} must be [N, H, Dqk], the caches {} and {} [N, cap, Hkv, D]", op, q.shape.str(),
           k_cache.shape.str(), v_cache.shape.str());
  const int64_t N = q.size(0), H = q.size(1), Dqk = q.size(2), cap = k_cache.size(1), Hkv = k_cache.size(2),
                Dv = v_cache.size(3);
  check_shape(k_cache, {N, cap, Hkv, Dqk}, "decode_attention k_cache");
  check_shape(v_cache, {N, cap, Hkv, Dv}, "decode_attention v_cache");
  check_shape(o, {N, H, Dv}, "decode_attention o");
  DT_CHECK(Hkv > 0 && H % Hkv == 0, "{}: KV heads {} must divide query heads {}", op, Hkv, H);
  DT_CHECK(len >= 1 && len <= cap, "{}: position {} must be in [0, {}) (the cache capacity)", op, pos.host, cap);
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"o", &o}, {"q", &q}, {"k_cache", &k_cache}, {"v_cache", &v_cache}});
    check_workspace(op, workspace, decode_attention_workspace(Device::kCUDA, N, H, cap, Dv));
    return cuda::attention(bf16(o), bf16(q), bf16(k_cache), bf16(v_cache), workspace.ptr<float>(), N, cap, H,
                                  Hkv, Dqk, Dv, pos.host, counter_ptr(op, pos), static_cast<float>(scale),
                                  ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  check_tensors(op, q.dtype, {{"o", &o}, {"q", &q}, {"k_cache", &k_cache}, {"v_cache", &v_cache}});
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    decode_attention_ref<T>(o.ptr<T>(), q.ptr<T>(), k_cache.ptr<T>(), v_cache.ptr<T>(), N, cap, H, Hkv, Dqk, Dv, len,
                            static_cast<T>(scale));
  });
}

namespace {

struct MlaDims {
  int64_t N, H, dn, dr, dv, cap, kvr, len;
};

// mla_decode_attention's shapes (c_cache [N, cap, kvr] of any dtype), checked.
MlaDims check_mla(const char* op, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe, const Tensor& w_kvb,
                  const Tensor& c_cache, const Tensor& pe_cache, const DecodePosition& pos) {
  DT_CHECK(q_nope.ndim() == 3 && q_pe.ndim() == 3 && o.ndim() == 3 && c_cache.ndim() == 3 && pe_cache.ndim() == 3 &&
               w_kvb.ndim() == 2,
           "{}: q_nope {}, q_pe {}, o {} must be [N, H, d], the caches {}, {} [N, cap, d], w_kvb {} 2-D", op,
           q_nope.shape.str(), q_pe.shape.str(), o.shape.str(), c_cache.shape.str(), pe_cache.shape.str(),
           w_kvb.shape.str());
  const MlaDims d{q_nope.size(0), q_nope.size(1), q_nope.size(2), q_pe.size(2), o.size(2),
                  c_cache.size(1), c_cache.size(2), pos.host + 1};
  check_shape(q_pe, {d.N, d.H, d.dr}, "mla_decode_attention q_pe");
  check_shape(o, {d.N, d.H, d.dv}, "mla_decode_attention o");
  check_shape(w_kvb, {d.H * (d.dn + d.dv), d.kvr}, "mla_decode_attention w_kvb");
  check_shape(pe_cache, {d.N, d.cap, d.dr}, "mla_decode_attention pe_cache");
  DT_CHECK(d.len >= 1 && d.len <= d.cap, "{}: position {} must be in [0, {}) (the cache capacity)", op, pos.host,
           d.cap);
  return d;
}

// The fp8 cache's latent and scales: f8e4m3 [N, cap, kvr] and fp32 [N, cap, kvr / kFp8Block] on one
// device, contiguous, kvr a multiple of kFp8Block.
void check_fp8_cache(const char* op, const Tensor& latent, const Tensor& scales) {
  DT_CHECK(latent.defined() && scales.defined() && latent.ndim() == 3 && latent.dtype == DType::kF8E4M3 &&
               scales.dtype == DType::kF32 && latent.is_contiguous() && scales.is_contiguous() &&
               latent.device == scales.device,
           "{}: the fp8 cache needs an f8e4m3 latent [N, cap, kvr] and fp32 scales, contiguous on one device; got {} "
           "and {}",
           op, latent.defined() ? latent.str() : "none", scales.defined() ? scales.str() : "none");
  const int64_t kvr = latent.size(2);
  DT_CHECK(kvr % kFp8Block == 0, "{}: the fp8 latent's width {} is not a multiple of {}", op, kvr, kFp8Block);
  check_shape(scales, {latent.size(0), latent.size(1), kvr / kFp8Block}, "fp8 latent cache scales");
}

}  // namespace

void mla_decode_attention(Context& ctx, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe, const Tensor& w_kvb,
                          const Tensor& c_cache, const Tensor& pe_cache, const DecodePosition& pos, double scale,
                          const Tensor& workspace) {
  const char* op = "mla_decode_attention";
  (void)workspace;  // GPU only
  const MlaDims d = check_mla(op, o, q_nope, q_pe, w_kvb, c_cache, pe_cache, pos);
  const int64_t N = d.N, H = d.H, dn = d.dn, dr = d.dr, dv = d.dv, cap = d.cap, kvr = d.kvr, len = d.len;
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16,
              {{"o", &o}, {"q_nope", &q_nope}, {"q_pe", &q_pe}, {"w_kvb", &w_kvb}, {"c_cache", &c_cache},
               {"pe_cache", &pe_cache}});
    check_workspace(op, workspace, mla_decode_workspace(Device::kCUDA, N, H, cap, kvr));
    return cuda::mla_attention(bf16(o), bf16(q_nope), bf16(q_pe), bf16(w_kvb), bf16(c_cache), bf16(pe_cache),
                                      workspace.ptr<float>(), N, cap, H, dn, dr, dv, kvr, pos.host,
                                      counter_ptr(op, pos), static_cast<float>(scale), ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  check_tensors(op, q_nope.dtype,
                {{"o", &o}, {"q_nope", &q_nope}, {"q_pe", &q_pe}, {"w_kvb", &w_kvb}, {"c_cache", &c_cache},
                 {"pe_cache", &pe_cache}});
  dispatch_float(q_nope.dtype, op, [&](auto t) {
    using T = decltype(t);
    mla_decode_attention_ref<T>(o.ptr<T>(), q_nope.ptr<T>(), q_pe.ptr<T>(), w_kvb.ptr<T>(), c_cache.ptr<T>(),
                                pe_cache.ptr<T>(), N, cap, H, dn, dr, dv, kvr, len, static_cast<T>(scale));
  });
}

void mla_decode_attention_fp8(Context& ctx, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe,
                              const Tensor& w_kvb, const Tensor& c_fp8, const Tensor& c_scales,
                              const Tensor& pe_cache, const DecodePosition& pos, double scale,
                              const Tensor& workspace) {
  const char* op = "mla_decode_attention_fp8";
  (void)workspace;  // GPU only
  check_fp8_cache(op, c_fp8, c_scales);
  const MlaDims d = check_mla(op, o, q_nope, q_pe, w_kvb, c_fp8, pe_cache, pos);
  const int64_t N = d.N, H = d.H, dn = d.dn, dr = d.dr, dv = d.dv, cap = d.cap, kvr = d.kvr, len = d.len;
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"o", &o}, {"q_nope", &q_nope}, {"q_pe", &q_pe}, {"w_kvb", &w_kvb}, {"pe_cache", &pe_cache}});
    DT_CHECK(c_fp8.device == Device::kCUDA, "{}: the fp8 cache {} must be on the GPU", op, c_fp8.str());
    check_workspace(op, workspace, mla_decode_workspace(Device::kCUDA, N, H, cap, kvr));
    return cuda::mla_attention_fp8(bf16(o), bf16(q_nope), bf16(q_pe), bf16(w_kvb), static_cast<uint8_t*>(c_fp8.data),
                                   c_scales.ptr<float>(), bf16(pe_cache), workspace.ptr<float>(), N, cap, H, dn, dr,
                                   dv, kvr, pos.host, counter_ptr(op, pos), static_cast<float>(scale), ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  check_tensors(op, q_nope.dtype, {{"o", &o}, {"q_nope", &q_nope}, {"q_pe", &q_pe}, {"w_kvb", &w_kvb}, {"pe_cache", &pe_cache}});
  dispatch_float(q_nope.dtype, op, [&](auto t) {
    using T = decltype(t);
    mla_decode_attention_fp8_ref<T>(o.ptr<T>(), q_nope.ptr<T>(), q_pe.ptr<T>(), w_kvb.ptr<T>(),
                                    static_cast<const uint8_t*>(c_fp8.data), c_scales.ptr<float>(), pe_cache.ptr<T>(),
                                    N, cap, H, dn, dr, dv, kvr, len, static_cast<T>(scale));
  });
}

namespace {

// The fp8 quantisation of rows src [R, kvr] into cache rows (r / per) cap + p0 + r % per (see
// cuda::latent_quantize): the decode step's write (per = 1, p0 = the position) and the capture
// (per = R, p0 = 0).
void latent_quantize(Context& ctx, const char* op, const Tensor& latent, const Tensor& scales, const Tensor& src,
                     int64_t R, int64_t per, const DecodePosition& pos) {
  check_fp8_cache(op, latent, scales);
  const int64_t cap = latent.size(1), kvr = latent.size(2);
  DT_CHECK(src.defined() && src.is_contiguous() && src.numel() == R * kvr && src.device == latent.device,
           "{}: src {} must be {} contiguous rows of {} on the cache's device", op, src.defined() ? src.str() : "none",
           R, kvr);
  DT_CHECK(per >= 1 && R % per == 0 && R / per <= latent.size(0) && pos.host >= 0 && pos.host + per <= cap,
           "{}: {} rows at position {} do not fit the cache {}", op, R, pos.host, latent.str());
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"src", &src}});
    return cuda::latent_quantize(static_cast<uint8_t*>(latent.data), scales.ptr<float>(), bf16(src), R, per, kvr, cap,
                                 pos.host, counter_ptr(op, pos), ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  const int64_t nb = kvr / kFp8Block;
  auto* q = static_cast<uint8_t*>(latent.data);
  float* sc = scales.ptr<float>();
  dispatch_float(src.dtype, op, [&](auto t) {
    using T = decltype(t);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t row = (r / per) * cap + pos.host + r % per;
      e4m3_quantize_row<T>(src.ptr<T>() + r * kvr, kvr, q + row * kvr, sc + row * nb);
    }
  });
}

}  // namespace

void latent_cache_write_fp8(Context& ctx, const Tensor& latent, const Tensor& scales, const Tensor& src,
                            const DecodePosition& pos) {
  const char* op = "latent_cache_write_fp8";
  DT_CHECK(latent.defined() && latent.ndim() == 3, "{}: latent must be [N, cap, kvr]", op);
  latent_quantize(ctx, op, latent, scales, src, latent.size(0), 1, pos);
}

void latent_cache_fill_fp8(Context& ctx, const Tensor& latent, const Tensor& scales, const Tensor& rows) {
  const char* op = "latent_cache_fill_fp8";
  DT_CHECK(rows.defined() && rows.ndim() >= 1 && latent.defined() && latent.ndim() == 3,
           "{}: rows [T, kvr] into a latent [N, cap, kvr]", op);
  const int64_t T = rows.numel() / std::max<int64_t>(latent.size(2), 1);
  DT_CHECK(T >= 1, "{}: no rows in {}", op, rows.str());
  latent_quantize(ctx, op, latent, scales, rows, T, T, {0, {}});
}

void cache_write(Context& ctx, const Tensor& cache, const Tensor& src, const DecodePosition& pos) {
  DT_CHECK(cache.defined() && src.defined() && cache.ndim() >= 2 && cache.is_contiguous() && src.is_contiguous() &&
               cache.dtype == src.dtype && cache.device == src.device,
           "cache_write: cache {} and src {} must be contiguous, of one dtype and device", cache.str(), src.str());
  const int64_t N = cache.size(0), cap = cache.size(1), row = cache.numel() / (N * cap);
  DT_CHECK(src.numel() == N * row, "cache_write: src {} must hold one row of {} elements per sequence of cache {}",
           src.shape.str(), row, cache.shape.str());
  DT_CHECK(pos.host >= 0 && pos.host < cap, "cache_write: position {} outside the cache's capacity {}", pos.host, cap);
  const size_t bytes = static_cast<size_t>(row) * dtype_size(cache.dtype);
  auto* dst = static_cast<char*>(cache.data);
  const auto* s = static_cast<const char*>(src.data);
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    DT_CHECK(cache.device == Device::kCUDA, "cache_write: cache {} must be on the GPU", cache.str());
    return cuda::cache_write(cache.data, src.data, N, cap, static_cast<int64_t>(bytes), pos.host,
                                    counter_ptr("cache_write", pos), ctx.stream);
  }
#endif
  require_cpu(ctx, "cache_write");
  for (int64_t n = 0; n < N; ++n)
    device_copy(dst + (n * cap + pos.host) * bytes, cache.device, s + n * bytes, src.device, bytes);
}

bool decode_gemv_supported(Device device, int64_t N, int64_t C) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA)
    return N >= 1 && N <= cuda::kGemvMaxRows && C >= 8 && C % 8 == 0 &&
           cuda::gemv_smem_bytes(N, C, GemvInput::kRmsNorm) <= cuda::kGemvMaxInputBytes;
#endif
  return device == Device::kCPU && N >= 1 && C >= 1;
}

int64_t decode_gemv_argmax_workspace(Device device) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA) return cuda::kGemvArgmaxWs;
#endif
  (void)device;
  return 0;
}

void decode_gemv(Context& ctx, std::initializer_list<GemvOut> outs, const GemvIn& in, const std::vector<Tensor>& l2,
                 const GemvArgmax& argmax) {
  const char* op = "decode_gemv";
  const Tensor& x = in.x;
  DT_CHECK(x.ndim() == 2 && x.is_contiguous(), "{}: x {} must be a contiguous [N, C] tensor", op, x.str());
  const int64_t N = x.size(0), C = x.size(1), ldx = C;
  const bool two = in.kind == GemvInput::kSwiGLU || in.kind == GemvInput::kGate;
  if (two)
    DT_CHECK(in.x2.defined() && in.x2.shape == x.shape && in.x2.is_contiguous() && in.x2.dtype == x.dtype,
             "{}: x2 {} must be contiguous, of x's shape and dtype ({})", op, in.x2.str(), x.str());
  if (in.kind == GemvInput::kRmsNorm)
    DT_CHECK(in.norm_w.defined() && in.norm_w.numel() == C && in.norm_w.is_contiguous(),
             "{}: the norm weight {} must be contiguous with {} elements", op, in.norm_w.str(), C);
  DT_CHECK(outs.size() >= 1 && outs.size() <= 4, "{}: {} weights (1 to 4)", op, outs.size());
  DT_CHECK(decode_gemv_supported(ctx.device, N, C), "{}: {} sequences of {} inputs are not supported on the {}", op,
           N, C, ctx.device == Device::kCUDA ? "GPU (at most 8 sequences, inputs a multiple of 8)" : "CPU");
  for (const GemvOut& g : outs) {
    DT_CHECK(g.w.ndim() == 2 && g.w.size(1) == C && g.w.is_contiguous(), "{}: weight {} does not take {} inputs", op,
             g.w.str(), C);
    DT_CHECK(g.y.numel() == N * g.w.size(0) && g.y.is_contiguous(), "{}: y {} is not [{}, {}]", op, g.y.str(), N,
             g.w.size(0));
    if (g.residual.defined())
      DT_CHECK(g.residual.numel() == g.y.numel() && g.residual.is_contiguous() && g.residual.dtype == g.y.dtype,
               "{}: residual {} does not match y {}", op, g.residual.str(), g.y.str());
    if (g.conv_w.defined()) {
      const int64_t rows = g.w.size(0);
      DT_CHECK(!g.residual.defined() && g.conv_w.ndim() == 3 && g.conv_w.size(0) == rows && g.conv_w.size(1) == 1 &&
                   g.conv_w.is_contiguous(),
               "{}: the conv weight {} must be [{}, 1, K], without a residual", op, g.conv_w.str(), rows);
      if (g.conv_w.size(2) > 1) check_shape(g.conv_tail, {N, g.conv_w.size(2) - 1, rows}, "decode_gemv conv tail");
    }
  }
  const bool greedy = argmax.ids.defined();
  if (greedy) {
    const Tensor& y = outs.begin()->y;
    DT_CHECK(outs.size() == 1 && y.dtype == DType::kF32,
             "{}: the argmax takes one weight with an f32 output, got {} weights (y {})", op, outs.size(), y.str());
    DT_CHECK(argmax.ids.dtype == DType::kI32 && argmax.ids.numel() == N && argmax.ids.is_contiguous() &&
                 argmax.ids.device == ctx.device,
             "{}: the argmax's ids {} must be a contiguous i32 tensor of {} ids on the context's device", op,
             argmax.ids.str(), N);
    DT_CHECK(argmax.vocab >= 1 && argmax.vocab <= outs.begin()->w.size(0), "{}: the argmax's vocab {} outside [1, {}]",
             op, argmax.vocab, outs.begin()->w.size(0));
    if (argmax.embed.defined()) {
      const auto d = op_checks::embedding(op, "embed_out", argmax.embed_out, argmax.ids, "embed", argmax.embed);
      DT_CHECK(d.vocab >= argmax.vocab && argmax.embed_out.is_contiguous() && argmax.embed.is_contiguous() &&
                   argmax.embed_out.dtype == argmax.embed.dtype,
               "{}: the embedding table {} must hold the vocab {}, and it and embed_out {} be contiguous, of one dtype",
               op, argmax.embed.str(), argmax.vocab, argmax.embed_out.str());
    }
  }
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    cuda::GemvParams p;
    int64_t end = 0;
    for (const GemvOut& g : outs) {
      check_gpu(op, DType::kBF16, {{"x", &x}, {"w", &g.w}});
      DT_CHECK(g.y.device == Device::kCUDA && (g.y.dtype == DType::kBF16 || g.y.dtype == DType::kF32),
               "{}: y {} must be bf16 or fp32 on the GPU", op, g.y.str());
      cuda::GemvSegment& s = p.seg[p.n_seg++];
      s.w = bf16(g.w), s.y = g.y.data, s.y_f32 = g.y.dtype == DType::kF32;
      s.residual = g.residual.defined() ? bf16(g.residual) : nullptr;
      if (g.conv_w.defined()) {
        check_gpu(op, DType::kF32, {{"conv_w", &g.conv_w}});
        s.conv_k = g.conv_w.size(2);
        if (s.conv_k > 1) check_gpu(op, DType::kBF16, {{"conv_tail", &g.conv_tail}});
        s.conv_w = g.conv_w.ptr<float>(), s.conv_tail = s.conv_k > 1 ? bf16(g.conv_tail) : nullptr;
      }
      s.row_end = end += g.w.size(0);
      s.settled = g.operands_settled;
    }
    if (two) check_gpu(op, DType::kBF16, {{"x2", &in.x2}});
    if (in.kind == GemvInput::kRmsNorm) check_gpu(op, DType::kF32, {{"norm_w", &in.norm_w}});
    p.in = in.kind, p.x = bf16(x), p.x2 = two ? bf16(in.x2) : nullptr;
    p.norm_w = in.kind == GemvInput::kRmsNorm ? in.norm_w.ptr<float>() : nullptr;
    p.eps = static_cast<float>(in.eps), p.zero_centered = in.zero_centered;
    p.N = N, p.C = C, p.ldx = ldx;
    DT_CHECK(l2.size() <= cuda::kGemvMaxSegments, "{}: {} tensors to prefetch (at most {})", op, l2.size(),
             cuda::kGemvMaxSegments);
    for (const Tensor& t : l2) {
      DT_CHECK(t.device == Device::kCUDA && t.is_contiguous(), "{}: the tensor {} to prefetch must be contiguous on the GPU",
               op, t.str());
      // Whole 16-byte blocks from a 16-byte boundary: the bulk prefetch's unit.
      const auto addr = reinterpret_cast<uintptr_t>(t.data), begin = (addr + 15) / 16 * 16;
      const auto end = (addr + t.bytes()) / 16 * 16;
      if (end <= begin) continue;
      p.l2[p.n_l2] = reinterpret_cast<const void*>(begin), p.l2_bytes[p.n_l2++] = static_cast<int64_t>(end - begin);
    }
    if (greedy) {
      check_workspace(op, argmax.ws, decode_gemv_argmax_workspace(Device::kCUDA), DType::kI32);
      p.argmax_out = argmax.ids.ptr<int32_t>(), p.argmax_vocab = argmax.vocab, p.argmax_ws = argmax.ws.ptr<int32_t>();
      p.argmax_counter = const_cast<int32_t*>(counter_ptr(op, {0, argmax.counter}));
      if (argmax.embed.defined()) {
        check_gpu(op, DType::kBF16, {{"embed", &argmax.embed}, {"embed_out", &argmax.embed_out}});
        DT_CHECK(argmax.embed.size(1) == C, "{}: the embedding table {} has not the input's {} features", op,
                 argmax.embed.str(), C);
        p.argmax_embed = bf16(argmax.embed), p.argmax_embed_out = bf16(argmax.embed_out);
      }
    }
    return cuda::gemv(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    if (in.kind == GemvInput::kRmsNorm) check_tensors(op, x.dtype, {{"norm_w", &in.norm_w}});
    for (const GemvOut& g : outs) {
      check_tensors(op, x.dtype, {{"w", &g.w}, {"y", &g.y}});
      const int64_t rows = g.w.size(0);
      std::vector<T> pre(g.conv_w.defined() ? static_cast<size_t>(N * rows) : 0);  // before the conv
      decode_gemv_ref<T>(pre.empty() ? g.y.ptr<T>() : pre.data(), g.w.ptr<T>(), in.kind, x.ptr<T>(),
                         two ? in.x2.ptr<T>() : nullptr, in.kind == GemvInput::kRmsNorm ? in.norm_w.ptr<T>() : nullptr,
                         static_cast<T>(in.eps), in.zero_centered,
                         g.residual.defined() ? g.residual.ptr<T>() : nullptr, N, C, ldx, rows);
      if (!pre.empty()) {
        const int64_t K = g.conv_w.size(2);
        check_tensors(op, x.dtype, {{"conv_w", &g.conv_w}});
        if (K > 1) check_tensors(op, x.dtype, {{"conv_tail", &g.conv_tail}});
        decode_conv_step_ref<T>(g.y.ptr<T>(), K > 1 ? g.conv_tail.ptr<T>() : nullptr, pre.data(), g.conv_w.ptr<T>(), N,
                                rows, K);
      }
    }
  });
  if (!greedy) return;
  decode_argmax(ctx, argmax.ids, outs.begin()->y.view({N, outs.begin()->w.size(0)}), argmax.vocab, argmax.counter);
  if (argmax.embed.defined()) embedding_forward(ctx, argmax.embed_out, argmax.ids, argmax.embed);
}

void decode_attn_prep(Context& ctx, const AttnPrepArgs& a, const DecodePosition& pos) {
  const char* op = "decode_attn_prep";
  const int64_t H = a.n_heads, Hkv = a.n_kv_heads, hd = a.head_dim;
  DT_CHECK(a.qg.defined() && a.k.defined() && a.v.defined() && a.q.defined() && a.k_cache.defined() &&
               a.v_cache.defined(),
           "{}: a tensor is not given", op);
  const int64_t N = a.qg.size(0), qw = a.gate.defined() ? 2 * hd : hd, cap = a.k_cache.size(1);
  DT_CHECK(a.qg.numel() == N * H * qw && a.q.numel() == N * H * hd && a.k.numel() == N * Hkv * hd &&
               a.v.numel() == N * Hkv * hd && (!a.gate.defined() || a.gate.numel() == N * H * hd),
           "{}: qg {}, q {}, k {}, v {} do not hold {} sequences of {} query and {} KV heads of {}", op, a.qg.str(),
           a.q.str(), a.k.str(), a.v.str(), N, H, Hkv, hd);
  DT_CHECK(a.k_cache.ndim() == 4 && a.k_cache.shape == a.v_cache.shape && a.k_cache.size(0) == N &&
               a.k_cache.size(2) == Hkv && a.k_cache.size(3) == hd,
           "{}: the caches {} and {} must be [{}, cap, {}, {}]", op, a.k_cache.str(), a.v_cache.str(), N, Hkv, hd);
  DT_CHECK(a.qn_w.defined() == a.kn_w.defined() && (!a.qn_w.defined() || (a.qn_w.numel() == hd && a.kn_w.numel() == hd)),
           "{}: the q and k norm weights must both be given, of {} elements, or neither", op, hd);
  DT_CHECK(pos.host >= 0 && pos.host < cap, "{}: position {} outside the cache's capacity {}", op, pos.host, cap);
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16,
              {{"qg", &a.qg}, {"k", &a.k}, {"v", &a.v}, {"q", &a.q}, {"k_cache", &a.k_cache}, {"v_cache", &a.v_cache}});
    if (a.gate.defined()) check_gpu(op, DType::kBF16, {{"gate", &a.gate}});
    if (a.qn_w.defined()) check_gpu(op, DType::kF32, {{"qn_w", &a.qn_w}, {"kn_w", &a.kn_w}});
    cuda::AttnPrepParams p;
    p.qg = bf16(a.qg), p.k = bf16(a.k), p.v = bf16(a.v);
    p.qn_w = a.qn_w.defined() ? a.qn_w.ptr<float>() : nullptr, p.kn_w = a.kn_w.defined() ? a.kn_w.ptr<float>() : nullptr;
    p.q = bf16(a.q), p.gate = a.gate.defined() ? bf16(a.gate) : nullptr;
    p.k_cache = bf16(a.k_cache), p.v_cache = bf16(a.v_cache);
    p.N = N, p.H = H, p.Hkv = Hkv, p.hd = hd, p.cap = cap, p.pos = pos.host, p.pos_dev = counter_ptr(op, pos);
    p.eps = static_cast<float>(a.eps), p.zero_centered = a.zero_centered, p.interleaved = false;
    p.rot = static_cast<int>(a.rotary_dim), p.theta = a.theta;
    return cuda::attn_prep(p, ctx.stream);
  }
#endif
  // The CPU: the unfused ops, which are the reference.
  Tensor q = a.qg.view({N, 1, H, qw});
  if (a.gate.defined()) {
    head_split_forward(ctx, a.q.view({N, 1, H, hd}), a.gate.view({N, 1, H, hd}), q);
    q = a.q.view({N, 1, H, hd});
  }
  if (a.qn_w.defined()) {  // in place: k is the step's scratch
    std::vector<double> rstd(static_cast<size_t>(N * std::max(H, Hkv)));  // holds either dtype; unused
    const Tensor rq(rstd.data(), a.qg.dtype, Device::kCPU, {N * H}), rk(rstd.data(), a.qg.dtype, Device::kCPU, {N * Hkv});
    rmsnorm_forward(ctx, a.q.view({N * H, hd}), rq, q.view({N * H, hd}), a.qn_w, a.eps, a.zero_centered);
    rmsnorm_forward(ctx, a.k.view({N * Hkv, hd}), rk, a.k.view({N * Hkv, hd}), a.kn_w, a.eps, a.zero_centered);
  } else if (!a.gate.defined()) {
    device_copy(a.q.data, a.q.device, a.qg.data, a.qg.device, a.q.bytes());
  }
  decode_rope(ctx, a.q.view({N, H, hd}), pos, a.rotary_dim, a.theta, /*interleaved=*/false);
  decode_rope(ctx, a.k.view({N, Hkv, hd}), pos, a.rotary_dim, a.theta, /*interleaved=*/false);
  cache_write(ctx, a.k_cache, a.k, pos);
  cache_write(ctx, a.v_cache, a.v, pos);
}

void gdn_decode_step(Context& ctx, const Tensor& y, const Tensor& state, const Tensor& qkv, const Tensor& z,
                     const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                     const Tensor& norm_w, int64_t Hk, int64_t dk, double q_scale, double eps) {
  const char* op = "gdn_decode_step";
  DT_CHECK(state.ndim() == 4, "{}: state {} must be [N, Hv, dk, dv]", op, state.str());
  const int64_t N = state.size(0), Hv = state.size(1), dv = state.size(3);
  DT_CHECK(state.size(2) == dk && Hk >= 1 && Hv % Hk == 0, "{}: state {} does not match Hk {}, dk {}", op,
           state.str(), Hk, dk);
  DT_CHECK(qkv.ndim() == 2 && qkv.size(0) == N && qkv.size(1) == 2 * Hk * dk + Hv * dv && qkv.is_contiguous(),
           "{}: qkv {} must be a contiguous [{}, {}] tensor", op, qkv.str(), N, 2 * Hk * dk + Hv * dv);
  DT_CHECK(z.numel() == N * Hv * dv && y.numel() == N * Hv * dv && z.is_contiguous() && y.is_contiguous(),
           "{}: z {} and y {} must be contiguous [{}, {}]", op, z.str(), y.str(), N, Hv * dv);
  DT_CHECK(a.numel() == N * Hv && b.numel() == N * Hv && A_log.numel() == Hv && dt_bias.numel() == Hv &&
               norm_w.numel() == dv,
           "{}: a {}, b {}, A_log {}, dt_bias {} or norm_w {} does not match N {}, Hv {}, dv {}", op, a.str(), b.str(),
           A_log.str(), dt_bias.str(), norm_w.str(), N, Hv, dv);
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    check_gpu(op, DType::kBF16, {{"y", &y}, {"z", &z}});
    check_gpu(op, DType::kF32,
              {{"state", &state}, {"a", &a}, {"b", &b}, {"A_log", &A_log}, {"dt_bias", &dt_bias}, {"norm_w", &norm_w}});
    DT_CHECK(qkv.device == Device::kCUDA && qkv.dtype == DType::kBF16, "{}: qkv {} must be bf16 on the GPU", op,
             qkv.str());
    cuda::GdnStepParams p;
    p.qkv = bf16(qkv), p.z = bf16(z), p.a = a.ptr<float>(), p.b = b.ptr<float>(), p.A_log = A_log.ptr<float>();
    p.dt_bias = dt_bias.ptr<float>(), p.norm_w = norm_w.ptr<float>(), p.state = state.ptr<float>(), p.y = bf16(y);
    p.N = N, p.Hk = Hk, p.Hv = Hv, p.dk = dk, p.dv = dv, p.ld_qkv = qkv.size(1), p.ld_z = Hv * dv, p.ld_y = Hv * dv;
    p.q_scale = static_cast<float>(q_scale), p.eps = static_cast<float>(eps);
    return cuda::gdn_step(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  dispatch_float(state.dtype, op, [&](auto t) {
    using T = decltype(t);
    check_tensors(op, state.dtype,
                  {{"y", &y}, {"z", &z}, {"a", &a}, {"b", &b}, {"A_log", &A_log}, {"dt_bias", &dt_bias},
                   {"norm_w", &norm_w}});
    DT_CHECK(qkv.dtype == state.dtype, "{}: qkv {} must be {}", op, qkv.str(), dtype_name(state.dtype));
    gdn_decode_step_ref<T>(y.ptr<T>(), state.ptr<T>(), qkv.ptr<T>(), z.ptr<T>(), a.ptr<T>(), b.ptr<T>(),
                           A_log.ptr<T>(), dt_bias.ptr<T>(), norm_w.ptr<T>(), N, Hk, Hv, dk, dv, qkv.size(1),
                           T(q_scale), T(eps));
  });
}

void decode_argmax(Context& ctx, const Tensor& out, const Tensor& logits, int64_t vocab, const Tensor& counter) {
  DT_CHECK(logits.ndim() == 2 && logits.dtype == DType::kF32 && logits.is_contiguous(),
           "decode_argmax: logits {} must be a contiguous f32 [N, V] tensor", logits.str());
  const int64_t N = logits.size(0), V = logits.size(1);
  DT_CHECK(out.dtype == DType::kI32 && out.numel() == N && out.is_contiguous(),
           "decode_argmax: out {} must be a contiguous i32 tensor of {} ids", out.str(), N);
  DT_CHECK(vocab >= 1 && vocab <= V, "decode_argmax: vocab {} outside [1, {}]", vocab, V);
  DT_CHECK(out.device == ctx.device && logits.device == ctx.device,
           "decode_argmax: the tensors must be on the context's device");
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    int32_t* c = const_cast<int32_t*>(counter_ptr("decode_argmax", {0, counter}));
    return cuda::argmax_rows(out.ptr<int32_t>(), logits.ptr<float>(), N, vocab, V, c, ctx.stream);
  }
#endif
  DT_CHECK(!counter.defined(), "decode_argmax: the position counter {} needs a CUDA context", counter.str());
  require_cpu(ctx, "decode_argmax");
  decode_argmax_ref(out.ptr<int32_t>(), logits.ptr<float>(), N, vocab, V);
}

void decode_advance(Context& ctx, const Tensor& counter) {
  (void)ctx;
  if (!counter.defined()) return;
#ifdef DELTATRON_HAVE_CUDA
  if (on_gpu(ctx)) {
    (void)counter_ptr("decode_advance", {0, counter});  // checked
    return cuda::advance(counter.ptr<int32_t>(), ctx.stream);
  }
#endif
  DT_FAIL("decode_advance: the position counter {} needs a CUDA context", counter.str());
}

int64_t decode_attention_workspace(Device device, int64_t N, int64_t H, int64_t cap, int64_t Dv) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA) return cuda::attention_workspace_elems(N, H, cap, Dv);
#endif
  (void)device, (void)N, (void)H, (void)cap, (void)Dv;
  return 0;
}

int64_t mla_decode_workspace(Device device, int64_t N, int64_t H, int64_t cap, int64_t kvr) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA) return cuda::mla_workspace_elems(N, H, cap, kvr);
#endif
  (void)device, (void)N, (void)H, (void)cap, (void)kvr;
  return 0;
}

}  // namespace dt
