// The GPU decode ops (infer/decode_ops.h -> infer/cuda/) against their CPU references
// (infer/cpu/decode_ref.h) run in double on the same bf16 inputs. Odd sizes, cache lengths 1, 37
// and past 1000 (several splits of the positions, a length short of the capacity), the position
// from the host and from the device counter; every output and the workspace poisoned with NaN
// first. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "infer/cpu/decode_ref.h"
#include "infer/decode_ops.h"
#include "tests/gpu/infer_cuda_util.h"

namespace dt {
namespace {

using namespace infer_cuda_testing;

Context gpu_context() {
  Context ctx;
  ctx.device = Device::kCUDA;  // stream = nullptr: the legacy default stream
  return ctx;
}

TEST(DecodeOpsCuda, ConvStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 3, C = 37;
  for (int64_t K : {1, 2, 4, 6}) {
    SCOPED_TRACE("K = " + std::to_string(K));
    const std::vector<float> x = randn(N * C, 1), w = randn(C * K, 2, 0.5, false);
    const std::vector<float> tail = K > 1 ? randn(N * (K - 1) * C, 3) : std::vector<float>{};
    Dev dx(DType::kBF16, {N, C}), dy(DType::kBF16, {N, C}), dw(DType::kF32, {C, 1, K});
    Dev dtail(DType::kBF16, {N, std::max<int64_t>(K - 1, 1), C});
    dx.upload(x), dw.upload(w);
    if (K > 1) dtail.upload(tail);
    dy.poison(ctx);
    decode_conv_step(ctx, dy, K > 1 ? dtail.t() : Tensor{}, dx, dw);
    std::vector<double> y(N * C), tl = to_double(tail);
    decode_conv_step_ref<double>(y.data(), K > 1 ? tl.data() : nullptr, to_double(x).data(), to_double(w).data(), N, C,
                                 K);
    expect_close("y", dy.download(), y, kBf16Rel, kFloorRel);
    if (K > 1) expect_close("tail (a copy: exact)", dtail.download(), tl, 0, 0);
  }
}

TEST(DecodeOpsCuda, RopeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 2, H = 3, D = 40;
  Dev counter(DType::kI32, {1});
  for (bool interleaved : {false, true})
    for (int64_t rot : {8, 24, 40})
      for (int64_t pos : {0, 5, 1000, 131071})
        for (bool on_device : {false, true}) {
          SCOPED_TRACE(std::string(interleaved ? "interleaved" : "halves") + ", rot " + std::to_string(rot) +
                       ", pos " + std::to_string(pos) + (on_device ? " from the counter" : " from the host"));
          const std::vector<float> x = randn(N * H * D, 10 + rot + pos);
          Dev dx(DType::kBF16, {N, H, D});
          dx.upload(x);
          DecodePosition at{pos, {}};
          if (on_device) {  // the host value is wrong on purpose: the kernel must read the counter
            counter.set_i32(static_cast<int32_t>(pos));
            at = DecodePosition{0, counter.t()};
          }
          decode_rope(ctx, dx, at, rot, 10000.0, interleaved);
          std::vector<double> want = to_double(x);
          decode_rope_ref<double>(want.data(), N, H, D, pos, rot, 10000.0, interleaved);
          expect_close("x", dx.download(), want, kBf16Rel, kFloorRel);
        }
}

TEST(DecodeOpsCuda, CacheWriteMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 3, cap = 37, H = 3, D = 10;
  Dev counter(DType::kI32, {1});
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (int64_t pos : {0, 17, 36}) {
      const std::vector<float> cache = randn(N * cap * H * D, 20 + pos), src = randn(N * H * D, 21 + pos);
      Dev dc(dtype, {N, cap, H, D}), ds(dtype, {N, H, D});
      dc.upload(cache), ds.upload(src);
      counter.set_i32(static_cast<int32_t>(pos));
      cache_write(ctx, dc, ds, DecodePosition{pos, counter.t()});
      std::vector<double> want = to_double(cache);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < H * D; ++e) want[(n * cap + pos) * H * D + e] = src[n * H * D + e];
      expect_close("cache at position " + std::to_string(pos), dc.download(), want, 0, 0);
    }
}

struct AttnCase {
  int64_t N, H, Hkv, Dqk, Dv, cap, len;
};

TEST(DecodeOpsCuda, AttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  const AttnCase cases[] = {
      {2, 6, 2, 40, 24, 1, 1},      {1, 4, 4, 32, 32, 37, 37},    {3, 6, 3, 24, 40, 37, 5},
      {2, 8, 1, 64, 64, 1000, 1000}, {1, 4, 2, 128, 128, 1500, 1283}, {2, 2, 1, 72, 256, 1100, 1037},
      {1, 2, 2, 16, 8, 4200, 4111},
  };
  for (const AttnCase& c : cases)
    for (bool on_device : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + ", D " +
                   std::to_string(c.Dqk) + "/" + std::to_string(c.Dv) + ", len " + std::to_string(c.len) + " of " +
                   std::to_string(c.cap) + (on_device ? ", counter" : ", host"));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dqk));
      const std::vector<float> q = randn(c.N * c.H * c.Dqk, 30 + c.cap), k = randn(c.N * c.cap * c.Hkv * c.Dqk, 31),
                               v = randn(c.N * c.cap * c.Hkv * c.Dv, 32);
      Dev dq(DType::kBF16, {c.N, c.H, c.Dqk}), dk(DType::kBF16, {c.N, c.cap, c.Hkv, c.Dqk}),
          dv(DType::kBF16, {c.N, c.cap, c.Hkv, c.Dv}), dout(DType::kBF16, {c.N, c.H, c.Dv});
      Dev ws(DType::kF32, {decode_attention_workspace(Device::kCUDA, c.N, c.H, c.cap, c.Dv)});
      dq.upload(q), dk.upload(k), dv.upload(v);
      dout.poison(ctx), ws.poison(ctx);
      DecodePosition at{c.len - 1, {}};
      if (on_device) {
        counter.set_i32(static_cast<int32_t>(c.len - 1));
        at.counter = counter.t();
      }
      decode_attention(ctx, dout, dq, dk, dv, at, scale, ws);
      std::vector<double> want(c.N * c.H * c.Dv);
      decode_attention_ref<double>(want.data(), to_double(q).data(), to_double(k).data(), to_double(v).data(), c.N,
                                   c.cap, c.H, c.Hkv, c.Dqk, c.Dv, c.len, scale);
      expect_close("o", dout.download(), want, kBf16Rel, kFloorRel);
    }
}

struct MlaCase {
  int64_t N, H, dn, dr, dv, kvr, cap, len;
};

TEST(DecodeOpsCuda, MlaAttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  const MlaCase cases[] = {
      {2, 3, 24, 8, 16, 40, 1, 1},        {1, 2, 16, 16, 32, 32, 37, 37},    {3, 5, 8, 8, 8, 24, 37, 11},
      {2, 4, 32, 16, 24, 72, 1000, 1000}, {1, 2, 128, 64, 128, 512, 1300, 1201},
  };
  for (const MlaCase& c : cases)
    for (bool on_device : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + ", dn/dr/dv/kvr " +
                   std::to_string(c.dn) + "/" + std::to_string(c.dr) + "/" + std::to_string(c.dv) + "/" +
                   std::to_string(c.kvr) + ", len " + std::to_string(c.len) + " of " + std::to_string(c.cap) +
                   (on_device ? ", counter" : ", host"));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.dn + c.dr));
      const std::vector<float> qn = randn(c.N * c.H * c.dn, 40 + c.cap), qp = randn(c.N * c.H * c.dr, 41),
                               w = randn(c.H * (c.dn + c.dv) * c.kvr, 42, 1.0 / std::sqrt(double(c.kvr))),
                               cc = randn(c.N * c.cap * c.kvr, 43), pe = randn(c.N * c.cap * c.dr, 44);
      Dev dqn(DType::kBF16, {c.N, c.H, c.dn}), dqp(DType::kBF16, {c.N, c.H, c.dr}),
          dw(DType::kBF16, {c.H * (c.dn + c.dv), c.kvr}), dc(DType::kBF16, {c.N, c.cap, c.kvr}),
          dpe(DType::kBF16, {c.N, c.cap, c.dr}), dout(DType::kBF16, {c.N, c.H, c.dv});
      Dev ws(DType::kF32, {mla_decode_workspace(Device::kCUDA, c.N, c.H, c.cap, c.kvr)});
      dqn.upload(qn), dw.upload(w), dc.upload(cc);
      dqp.upload(qp), dpe.upload(pe);
      dout.poison(ctx), ws.poison(ctx);
      DecodePosition at{c.len - 1, {}};
      if (on_device) {
        counter.set_i32(static_cast<int32_t>(c.len - 1));
        at.counter = counter.t();
      }
      mla_decode_attention(ctx, dout, dqn, dqp, dw, dc, dpe, at, scale, ws);
      std::vector<double> want(c.N * c.H * c.dv);
      mla_decode_attention_ref<double>(want.data(), to_double(qn).data(), to_double(qp).data(), to_double(w).data(),
                                       to_double(cc).data(), to_double(pe).data(), c.N, c.cap, c.H, c.dn, c.dr, c.dv,
                                       c.kvr, c.len, scale);
      expect_close("o", dout.download(), want, kBf16Rel, kFloorRel);
    }
}

// Wrong dtypes, a missing workspace and a bad counter are errors naming the op and the tensor.
TEST(DecodeOpsCuda, BadInputIsAClearError) {
  SKIP_WITHOUT_GPU();
  Context ctx = gpu_context();
  Dev q32(DType::kF32, {1, 2, 8}), q(DType::kBF16, {1, 2, 8}), k(DType::kBF16, {1, 5, 1, 8}),
      v(DType::kBF16, {1, 5, 1, 8}), o(DType::kBF16, {1, 2, 8}), c64(DType::kF32, {2});
  Dev ws(DType::kF32, {decode_attention_workspace(Device::kCUDA, 1, 2, 5, 8)});
  auto expect_error = [](auto&& f, const std::vector<std::string>& pieces) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      for (const std::string& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect_error([&] { decode_attention(ctx, o, q32, k, v, {2, {}}, 1.0, ws); }, {"decode_attention", "q", "bf16"});
  expect_error([&] { decode_attention(ctx, o, q, k, v, {2, {}}, 1.0); }, {"decode_attention", "workspace"});
  expect_error([&] { decode_attention(ctx, o, q, k, v, {5, {}}, 1.0, ws); }, {"decode_attention", "position 5"});
  expect_error([&] { decode_rope(ctx, q, {0, c64.t()}, 8, 1e4, false); }, {"decode_rope", "counter", "int32"});
}

}  // namespace
}  // namespace dt
