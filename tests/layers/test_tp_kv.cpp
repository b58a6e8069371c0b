// GQA attention with fewer KV heads than TP ranks (KV heads replicated), shard-and-compare in one
// process: each TP rank's layer runs in turn with a stand-in TP communicator whose all-reduce is the
// identity, so a rank's output and input gradient are its partial sums, and
//   sum over ranks of y_r  = y of the one-process layer      (reduce_from_tp_region forward)
//   sum over ranks of dx_r = dx                               (copy_to_tp_region backward)
//   split parameters: rank r's gradient = its part of the one-process gradient
//   replicated k_proj / v_proj / q_norm / k_norm (tp_partial_grad): sum over ranks = the gradient,
//   and a rank leaves the rows of the KV heads it does not compute at zero.
// In double, so the sums agree to rounding. The same layers under mpirun: tests/mpi/test_mpi_kv.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "layers/attention.h"
#include "parallel/communicator.h"

namespace dt {
namespace {

// Rank `rank` of a TP group of `size` whose all-reduce leaves every tensor as it is (the test sums
// the ranks' partial results itself). Any other collective is a test error.
class PartialSumComm final : public Communicator {
 public:
  PartialSumComm(int rank, int size) : Communicator(rank, size, "tp", Device::kCPU, 1.0) {}
  std::string_view backend() const override { return "partial-sum (test)"; }

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor&, ReduceOp) override { return completed_request(); }
  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override {
    DT_FAIL("reduce_scatter is not expected here");
  }
  std::unique_ptr<CommRequest> do_all_gather(const Tensor&, const Tensor&) override {
    DT_FAIL("all_gather is not expected here");
  }
  void do_broadcast(const Tensor&, int) override { DT_FAIL("broadcast is not expected here"); }
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int, int, std::string) override { DT_FAIL("split is not expected here"); }
};

constexpr int kB = 2, kT = 5, kC = 20;  // odd sizes

ModelConfig attn_config(int heads, int kv_heads, bool qk_norm, bool gate) {
  ModelConfig cfg;
  cfg.vocab_size = 32;
  cfg.d_model = kC;
  cfg.d_ff = 16;
  cfg.layers = {MixerKind::kAttn};
  cfg.attn = AttnConfig{.n_heads = heads, .n_kv_heads = kv_heads, .head_dim = 6, .rotary_dim = 4,
                        .rope_theta = 100.0, .qk_norm = qk_norm, .output_gate = gate};
  return cfg;
}

// One layer of one rank, in double: its parameters (init seed 3, so every rank starts from its part
// of the same model), activations, and random-looking non-zero norm weights.
struct Rank {
  ParamStore params;
  Arena acts{"acts", Device::kCPU};
  Attention layer;
  Rank(const ModelConfig& cfg, TpLayout tp) : params(DType::kF64, Device::kCPU, tp), layer(cfg, "model.layers.0.self_attn", tp) {
    layer.declare(params, acts, kB, kT);
    params.allocate();
    acts.allocate();
    params.init(3);
    // The zero-centred norms start at 0; give them values so their gradients are tested.
    for (int s = 0; s < params.size(); ++s)
      if (params.infos()[s].name.find("_norm") != std::string::npos) {
        Tensor w = params.master(s);
        for (int64_t i = 0; i < w.numel(); ++i) w.ptr<double>()[i] = 0.1 * std::sin(1.0 + i);
      }
  }
};

std::vector<double> random_vector(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (double& x : v) x = nd(rng);
  return v;
}

Tensor view(std::vector<double>& v, Shape s) { return Tensor(v.data(), DType::kF64, Device::kCPU, s); }

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double d = 0, m = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d = std::max(d, std::fabs(got[i] - want[i]));
    m = std::max(m, std::fabs(want[i]));
  }
  return m == 0 ? d : d / m;
}

void check_sharded_attention(int heads, int kv_heads, int tp, bool qk_norm, bool gate) {
  SCOPED_TRACE(::testing::Message() << "H " << heads << ", Hkv " << kv_heads << ", tp " << tp << ", qk_norm "
                                    << qk_norm << ", gate " << gate);
  const ModelConfig cfg = attn_config(heads, kv_heads, qk_norm, gate);
  const Shape io{kB, kT, kC};
  const int64_t n = io.numel();
  std::vector<double> x = random_vector(n, 11), dy = random_vector(n, 12);

  Rank ref(cfg, {});
  Context ref_ctx;
  std::vector<double> y_ref(n), dx_ref(n);
  ref.layer.forward(ref_ctx, view(x, io), view(y_ref, io));
  ref.layer.backward(ref_ctx, view(dy, io), view(dx_ref, io));

  std::vector<double> y_sum(n, 0.0), dx_sum(n, 0.0);
  const ParamStore& rp = ref.params;
  std::vector<std::vector<double>> partial_sums(rp.size());  // the tp_partial_grad parameters' summed gradients
  int replicated_kv = 0;
  for (int r = 0; r < tp; ++r) {
    Rank rank(cfg, {r, tp});
    PartialSumComm comm(r, tp);
    Context ctx;
    ctx.tp = &comm;
    std::vector<double> y(n, NAN), dx(n, NAN);  // poisoned: an unwritten element shows
    rank.layer.forward(ctx, view(x, io), view(y, io));
    rank.layer.backward(ctx, view(dy, io), view(dx, io));
    for (int64_t i = 0; i < n; ++i) y_sum[i] += y[i], dx_sum[i] += dx[i];

    const ParamStore& ps = rank.params;
    ASSERT_EQ(ps.size(), rp.size());
    for (int s = 0; s < ps.size(); ++s) {
      const ParamInfo& info = ps.infos()[s];
      ASSERT_EQ(info.name, rp.infos()[s].name);
      EXPECT_EQ(info.full_shape, rp.infos()[s].shape) << info.name;
      const double* g = ps.grad(s).ptr<double>();
      const int64_t m = info.shape.numel();
      const bool kv = info.name.find("k_proj") != std::string::npos || info.name.find("v_proj") != std::string::npos;
      if (kv && kv_heads < tp) {
        ++replicated_kv;
        EXPECT_EQ(info.split, TpSplit::kReplicated) << info.name;
        EXPECT_TRUE(info.tp_partial_grad) << info.name;
        EXPECT_EQ(info.shape, info.full_shape) << info.name << ": held whole";
        // Only the rows of the KV head this rank's query heads read: g = r Hkv / tp.
        const int64_t hd = cfg.attn.head_dim, own = int64_t{r} * kv_heads / tp;
        for (int64_t i = 0; i < m; ++i) {
          const int64_t head = i / kC / hd;
          if (head != own) {
            ASSERT_EQ(g[i], 0.0) << info.name << " rank " << r << " row " << i / kC;
          }
        }
      }
      if (info.tp_partial_grad) {
        ASSERT_EQ(m, info.full_shape.numel()) << info.name;
        auto& sum = partial_sums[s];
        sum.resize(m, 0.0);
        for (int64_t i = 0; i < m; ++i) sum[i] += g[i];
      } else {
        std::vector<double> want(m), got(g, g + m);
        tp_copy_part(info, {r, tp}, rp.grad(s).data, want.data(), sizeof(double), /*to_part=*/true);
        EXPECT_LE(max_rel(got, want), 1e-12) << "rank " << r << ": gradient of " << info.name;
      }
    }
  }
  EXPECT_LE(max_rel(y_sum, y_ref), 1e-12) << "output";
  EXPECT_LE(max_rel(dx_sum, dx_ref), 1e-12) << "input gradient";
  for (int s = 0; s < rp.size(); ++s) {
    if (partial_sums[s].empty()) continue;
    const double* g = rp.grad(s).ptr<double>();
    std::vector<double> want(g, g + rp.grad(s).numel());
    EXPECT_LE(max_rel(partial_sums[s], want), 1e-12) << "summed gradient of " << rp.infos()[s].name;
  }
  if (kv_heads < tp) {
    EXPECT_EQ(replicated_kv, 2 * tp);
  }
}

TEST(TpKvReplication, OneKvHeadOnEveryRank) {
  for (int tp : {2, 4, 8}) check_sharded_attention(8, 1, tp, /*qk_norm=*/true, /*gate=*/true);
  check_sharded_attention(8, 1, 2, /*qk_norm=*/false, /*gate=*/false);
}

TEST(TpKvReplication, TwoKvHeadsOverFourAndEightRanks) {
  for (int tp : {4, 8}) check_sharded_attention(8, 2, tp, true, true);
  check_sharded_attention(8, 4, 8, true, false);
  check_sharded_attention(16, 2, 4, false, true);
}

TEST(TpKvReplication, KvHeadsSplitAsBeforeWhenTheyDivide) {
  check_sharded_attention(8, 4, 2, true, true);  // two KV heads a rank, column-parallel
  check_sharded_attention(8, 2, 2, true, true);
}

TEST(TpKvReplication, ATpThatIsNotAMultipleOfTheKvHeadsIsAClearError) {
  const ModelConfig cfg = attn_config(12, 3, true, true);
  try {
    Attention a(cfg, "model.layers.3.self_attn", {0, 4});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* s : {"model.layers.3.self_attn", "n_kv_heads = 3", "parallel.tp"})
      EXPECT_NE(what.find(s), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dt
