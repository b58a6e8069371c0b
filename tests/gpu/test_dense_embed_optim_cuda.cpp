// The CUDA embedding and optimizer ops (kernels/cuda/{embedding, optim}.cu) against the CPU
// references. Skips when there is no GPU. Inputs and tolerances: tests/gpu/dense_elem_test_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/dense_elem.h"
#include "kernels/fill.h"
#include "kernels/ops.h"
#include "tests/gpu/dense_elem_test_util.h"
#include "tests/gpu/gpu_tensor.h"

namespace dt {
namespace {

using namespace dense_elem_test;

// ============================================================================
// embedding
// ============================================================================

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, const std::string& name) {
  const uint64_t stream = philox_stream_of(name.c_str());
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(philox4x32(run_seed(), stream, static_cast<uint64_t>(i)).v[0] % vocab);
  return ids;
}

TEST(DenseElemCuda, EmbeddingForwardCopiesRowsAndPoisonsBadIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (int64_t dim : {64, 48, 37}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const int64_t vocab = 1000, n = 517;
    const auto w = randn(vocab * dim, "emb.w" + std::to_string(dim));
    auto ids = random_ids(n, vocab, "emb.ids" + std::to_string(dim));
    std::vector<float> want(n * dim);
    embedding_forward_ref<float>(want.data(), ids.data(), w.data(), n, vocab, dim);
    Dev wd(DType::kBF16, Shape{vocab, dim}), idd(DType::kI32, Shape{n}), yd(DType::kBF16, Shape{n, dim});
    wd.upload(w), idd.upload_i32(ids), yd.poison(ctx);
    embedding_forward(ctx, yd, idd, wd);
    expect_exact("embedding y", yd.download(), want);

    // Ids outside [0, vocab) cannot throw on the GPU: their rows come out NaN.
    ids[3] = static_cast<int32_t>(vocab), ids[10] = -1;
    idd.upload_i32(ids);
    embedding_forward(ctx, yd, idd, wd);
    const auto y = yd.download();
    for (int64_t i : {int64_t{3}, int64_t{10}})
      for (int64_t d = 0; d < dim; ++d) EXPECT_TRUE(std::isnan(y[i * dim + d])) << "row " << i << " col " << d;
    for (int64_t d = 0; d < dim; ++d) EXPECT_EQ(y[4 * dim + d], want[4 * dim + d]);
  }
}

TEST(DenseElemCuda, EmbeddingBackwardDeterministicWithRepeatedIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  struct Case {
    int64_t vocab, n, dim;
  };
  // Many repeats (50 ids over 4099 tokens), a larger vocabulary, a dim that is not a vector multiple.
  for (const Case& c : {Case{50, 4099, 64}, Case{1000, 300, 48}, Case{1000, 300, 37}, Case{3, 3000, 2048}}) {
    const std::string name = "vocab=" + std::to_string(c.vocab) + " n=" + std::to_string(c.n) +
                             " dim=" + std::to_string(c.dim);
    SCOPED_TRACE(name);
    const auto ids = random_ids(c.n, c.vocab, "embb.ids" + name);
    const auto dy = randn(c.n * c.dim, "embb.dy" + name);
    const auto dw0 = randn(c.vocab * c.dim, "embb.dw0" + name, 1.0, false);
    // The float reference adds in position order onto dw0, the order the kernel uses: equal bits.
    std::vector<float> want_f = dw0;
    embedding_backward_ref<float>(want_f.data(), dy.data(), ids.data(), c.n, c.vocab, c.dim);
    std::vector<double> want = to_double(dw0), abs_sum(c.vocab * c.dim);
    const auto dd = to_double(dy);
    embedding_backward_ref<double>(want.data(), dd.data(), ids.data(), c.n, c.vocab, c.dim);
    for (int64_t i = 0; i < c.vocab * c.dim; ++i) abs_sum[i] = std::fabs(dw0[i]);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t d = 0; d < c.dim; ++d) abs_sum[ids[i] * c.dim + d] += std::fabs(dy[i * c.dim + d]);
    // fp32 sequential sum of up to n terms: error <= n 2^-24 sum|terms|; 2x that.
    std::vector<double> floors(abs_sum.size());
    for (size_t i = 0; i < floors.size(); ++i) floors[i] = 2.0 * c.n * std::ldexp(1.0, -24) * abs_sum[i];

    Dev idd(DType::kI32, Shape{c.n}), dyd(DType::kBF16, Shape{c.n, c.dim}), dwd(DType::kF32, Shape{c.vocab, c.dim});
    idd.upload_i32(ids), dyd.upload(dy);
    std::vector<uint8_t> bits[2];
    for (int run = 0; run < 2; ++run) {
      dwd.upload(dw0);
      embedding_backward(ctx, dwd, dyd, idd);
      bits[run] = dwd.raw();
    }
    const auto got = dwd.download();
    expect_close("embedding dw vs double", got, want, 0.0, 0.0, floors);
    expect_exact("embedding dw vs the float reference (same order of additions)", got, want_f);
    expect_bits_equal("embedding dw", bits[0], bits[1]);

    // The same through a preallocated scratch buffer.
    const int64_t scratch_bytes = cuda::embedding_backward_scratch_bytes(c.n, c.vocab);
    Dev scratch(DType::kU16, Shape{scratch_bytes / 2 + 1});
    dwd.upload(dw0);
    cuda::embedding_backward_launch(static_cast<float*>(dwd.t().data), static_cast<uint16_t*>(dyd.t().data),
                                    static_cast<int32_t*>(idd.t().data), c.n, c.vocab, c.dim,
                                    scratch.t().data, nullptr, nullptr);
    expect_bits_equal("embedding dw (preallocated scratch)", bits[0], dwd.raw());
  }
}

TEST(DenseElemCuda, EmbeddingBackwardSkipsBadIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t vocab = 17, n = 200, dim = 16;
  auto ids = random_ids(n, vocab, "embbad.ids");
  ids[0] = -5, ids[7] = static_cast<int32_t>(vocab), ids[100] = 1 << 30;
  const auto dy = randn(n * dim, "embbad.dy");
  const auto dw0 = randn(vocab * dim, "embbad.dw0", 1.0, false);
  std::vector<float> want = dw0;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) continue;
    for (int64_t d = 0; d < dim; ++d) want[ids[i] * dim + d] += dy[i * dim + d];
  }
  Dev idd(DType::kI32, Shape{n}), dyd(DType::kBF16, Shape{n, dim}), dwd(DType::kF32, Shape{vocab, dim});
  idd.upload_i32(ids), dyd.upload(dy), dwd.upload(dw0);
  embedding_backward(ctx, dwd, dyd, idd);
  expect_exact("embedding dw with bad ids skipped", dwd.download(), want);
}

// ============================================================================
// optimizer: AdamW, sum_squares, scale_tensors
// ============================================================================

// Sizes: tiny, around one chunk (16384), several chunks; offset 1 (scalar path) on one of them.
struct OptimSize {
  int64_t n, offset;
};
const OptimSize kOptimSizes[] = {{1, 0}, {3, 0}, {1000, 1}, {16384 + 5, 0}, {70001, 0}, {16384, 1}};

TEST(DenseElemCuda, AdamWMatchesCpuOverThreeSteps) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context(), cpu;
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, lr = 3e-3, wd = 0.1;
  const size_t nt = std::size(kOptimSizes);
  std::vector<std::vector<float>> p(nt), m(nt), v(nt);
  std::vector<std::unique_ptr<Dev>> pd, gd, md, vd, pcd;
  for (size_t k = 0; k < nt; ++k) {
    const auto [n, off] = kOptimSizes[k];
    p[k] = randn(n, "adamw.p" + std::to_string(k), 0.05, false);
    m[k].assign(n, 0.f), v[k].assign(n, 0.f);
    for (auto* list : {&pd, &gd, &md, &vd}) list->push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    pcd.push_back(std::make_unique<Dev>(DType::kBF16, Shape{n}, off));
    pd[k]->upload(p[k]), md[k]->upload(m[k]), vd[k]->upload(v[k]);
  }
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, step)), step_size = lr / (1.0 - std::pow(b1, step));
    std::vector<AdamWTensor> gpu_ts(nt), cpu_ts(nt);
    std::vector<std::vector<float>> g(nt);
    for (size_t k = 0; k < nt; ++k) {
      const int64_t n = kOptimSizes[k].n;
      g[k] = randn(n, "adamw.g" + std::to_string(k) + "." + std::to_string(step), 0.01, false);
      gd[k]->upload(g[k]);
      const double decay = k % 2 == 0 ? 1.0 - lr * wd : 1.0;  // every other tensor without weight decay
      gpu_ts[k] = AdamWTensor{pd[k]->t(), gd[k]->t(), md[k]->t(), vd[k]->t(), k % 3 == 0 ? pcd[k]->t() : Tensor(), decay};
      if (k % 3 == 0) pcd[k]->poison(ctx);
      auto host = [&](std::vector<float>& x) { return Tensor(x.data(), DType::kF32, Device::kCPU, Shape{n}); };
      cpu_ts[k] = AdamWTensor{host(p[k]), host(g[k]), host(m[k]), host(v[k]), Tensor(), decay};
    }
    adamw_update(ctx, gpu_ts, b1, b2, step_size, bc2_sqrt, eps);
    adamw_update(cpu, cpu_ts, b1, b2, step_size, bc2_sqrt, eps);
    for (size_t k = 0; k < nt; ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k) + " of " + std::to_string(kOptimSizes[k].n) + " elements");
      expect_close("adamw p", pd[k]->download(), to_double(p[k]), 1e-6, 1e-30);
      expect_close("adamw m", md[k]->download(), to_double(m[k]), 1e-6, 1e-30);
      expect_close("adamw v", vd[k]->download(), to_double(v[k]), 1e-6, 1e-30);
      if (k % 3 == 0) {
        std::vector<float> want(p[k].size());
        const auto got_p = pd[k]->download();
        for (size_t i = 0; i < want.size(); ++i) want[i] = round_bf16(got_p[i]);
        expect_exact("adamw p_compute = bf16(p)", pcd[k]->download(), want);
      }
    }
  }
}

// Gradient clipping folded into the update: adamw_update(..., grad_scale) on the unscaled gradients
// against scale_tensors(g, grad_scale) then adamw_update at 1, both on the GPU: the same bits (p, m,
// v, the bf16 copies), and the gradients left as they were; and against the CPU path with the same
// grad_scale. Two steps, two factors below 1, every size (the vector and the scalar paths).
TEST(DenseElemCuda, AdamWGradScaleIsScaleThenUpdate) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context(), cpu;
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, lr = 3e-3, wd = 0.1;
  const size_t nt = std::size(kOptimSizes);
  struct State {
    std::unique_ptr<Dev> p, g, m, v, pc;
  };
  std::vector<State> first(nt), fused(nt);  // scaled first, then updated at 1; scaled in the update
  std::vector<std::vector<float>> p(nt), m(nt), v(nt);  // the CPU's
  for (size_t k = 0; k < nt; ++k) {
    const auto [n, off] = kOptimSizes[k];
    p[k] = randn(n, "adamw_scale.p" + std::to_string(k), 0.05, false);
    m[k].assign(n, 0.f), v[k].assign(n, 0.f);
    for (State* st : {&first[k], &fused[k]}) {
      for (auto* d : {&st->p, &st->g, &st->m, &st->v}) *d = std::make_unique<Dev>(DType::kF32, Shape{n}, off);
      st->pc = std::make_unique<Dev>(DType::kBF16, Shape{n}, off);
      st->p->upload(p[k]), st->m->upload(m[k]), st->v->upload(v[k]);
    }
  }
  for (int step = 1; step <= 2; ++step) {
    const double grad_scale = step == 1 ? 0.3712345678901234 : 1.0 / (7.25 + 1e-6);
    SCOPED_TRACE("step " + std::to_string(step) + ", grad_scale " + std::to_string(grad_scale));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, step)), step_size = lr / (1.0 - std::pow(b1, step));
    std::vector<AdamWTensor> first_ts(nt), fused_ts(nt), cpu_ts(nt);
    std::vector<Tensor> first_grads;
    std::vector<std::vector<float>> g(nt), g_cpu(nt);
    for (size_t k = 0; k < nt; ++k) {
      const int64_t n = kOptimSizes[k].n;
      g[k] = randn(n, "adamw_scale.g" + std::to_string(k) + "." + std::to_string(step), 0.01, false);
      g_cpu[k] = g[k];
      const double decay = k % 2 == 0 ? 1.0 - lr * wd : 1.0;
      const bool with_pc = k % 3 == 0;
      for (auto [st, ts] : {std::pair{&first[k], &first_ts[k]}, std::pair{&fused[k], &fused_ts[k]}}) {
        st->g->upload(g[k]);
        if (with_pc) st->pc->poison(ctx);
        *ts = AdamWTensor{st->p->t(), st->g->t(), st->m->t(), st->v->t(), with_pc ? st->pc->t() : Tensor(), decay};
      }
      first_grads.push_back(first[k].g->t());
      auto host = [&](std::vector<float>& x) { return Tensor(x.data(), DType::kF32, Device::kCPU, Shape{n}); };
      cpu_ts[k] = AdamWTensor{host(p[k]), host(g_cpu[k]), host(m[k]), host(v[k]), Tensor(), decay};
    }
    scale_tensors(ctx, first_grads, grad_scale);
    adamw_update(ctx, first_ts, b1, b2, step_size, bc2_sqrt, eps);
    adamw_update(ctx, fused_ts, b1, b2, step_size, bc2_sqrt, eps, grad_scale);
    adamw_update(cpu, cpu_ts, b1, b2, step_size, bc2_sqrt, eps, grad_scale);
    for (size_t k = 0; k < nt; ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k) + " of " + std::to_string(kOptimSizes[k].n) + " elements");
      expect_exact("fused p vs scale then update", fused[k].p->download(), first[k].p->download());
      expect_exact("fused m vs scale then update", fused[k].m->download(), first[k].m->download());
      expect_exact("fused v vs scale then update", fused[k].v->download(), first[k].v->download());
      if (k % 3 == 0) expect_exact("fused p_compute vs scale then update", fused[k].pc->download(), first[k].pc->download());
      expect_exact("the gradient after the fused update (read only)", fused[k].g->download(), g[k]);
      expect_close("fused p vs the CPU", fused[k].p->download(), to_double(p[k]), 1e-6, 1e-30);
      expect_close("fused m vs the CPU", fused[k].m->download(), to_double(m[k]), 1e-6, 1e-30);
      expect_close("fused v vs the CPU", fused[k].v->download(), to_double(v[k]), 1e-6, 1e-30);
    }
  }
}

TEST(DenseElemCuda, SumSquaresMatchesDoubleAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  std::vector<std::unique_ptr<Dev>> ds;
  std::vector<Tensor> ts;
  double want = 0;
  for (size_t k = 0; k < std::size(kOptimSizes); ++k) {
    const auto [n, off] = kOptimSizes[k];
    const auto x = randn(n, "sumsq.x" + std::to_string(k), 1.0 + k, false);
    for (float f : x) want += static_cast<double>(f) * f;
    ds.push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    ds.back()->upload(x);
    ts.push_back(ds.back()->t());
  }
  Dev empty(DType::kF32, Shape{0});
  ts.push_back(empty.t());
  const double got = sum_squares(ctx, ts), again = sum_squares(ctx, ts);
  EXPECT_NEAR(got, want, 1e-6 * want) << "sum_squares vs the double sum";
  EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0) << "sum_squares differs between two calls: " << got << " vs "
                                                       << again;
  EXPECT_EQ(sum_squares(ctx, std::span<const Tensor>()), 0.0);
}

TEST(DenseElemCuda, ScaleTensorsIsTheRoundedDoubleProduct) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const double factor = 0.3712345678901234;
  std::vector<std::unique_ptr<Dev>> ds;
  std::vector<Tensor> ts;
  std::vector<std::vector<float>> want;
  for (size_t k = 0; k < std::size(kOptimSizes); ++k) {
    const auto [n, off] = kOptimSizes[k];
    auto x = randn(n, "scale.x" + std::to_string(k), 1.0, false);
    ds.push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    ds.back()->upload(x);
    ts.push_back(ds.back()->t());
    for (float& f : x) f = static_cast<float>(f * factor);  // the CPU path's arithmetic
    want.push_back(x);
  }
  scale_tensors(ctx, ts, factor);
  for (size_t k = 0; k < ds.size(); ++k) expect_exact("scale_tensors tensor " + std::to_string(k), ds[k]->download(), want[k]);
}

}  // namespace
}  // namespace dt
