// ZeRO-1 and the overlapped DP gradient sync under mpirun (2 and 4 ranks; with 4, also a group of 3,
// whose size does not divide the f32 arena, so the last bucket is padded):
//   - DpGradSync's reduce-scatter leaves on each rank its shard of the mean, the same bits as the
//     all-reduce mean there (both reduce in rank order); all_gather_shards puts the shards together;
//   - the overlapped sync (buckets started as the backward reports slots final, last slots first)
//     gives the bits of the sync after the backward, step after step;
//   - training: overlap on/off, ZeRO-1 on/off, at tp 1 x dp N, tp 2 x dp 2 and dp 3, and resuming a
//     ZeRO-1 run without it and back, across TP layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/arena.h"
#include "core/error.h"
#include "layers/model.h"
#include "parallel/dp_grads.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/mpi/mpi_train_util.h"

namespace dt::mpitest {
namespace {

// The world, and with 4 ranks also ranks {0, 1, 2} (rank 3 then runs alone, a group of one).
std::vector<std::unique_ptr<Communicator>> dp_groups() {
  std::vector<std::unique_ptr<Communicator>> out;
  out.push_back(world().split(0, world().rank(), "dp"));
  if (world().size() == 4) out.push_back(world().split(world().rank() < 3 ? 0 : 1, world().rank(), "dp3"));
  return out;
}

// An arena of odd slots: 13 blocks of 256 bytes, 832 f32 (3 does not divide it) or 1664 bf16.
void declare_slots(Arena& a, DType dtype) {
  const std::vector<Shape> shapes = {{3, 5}, {1}, {7}, {64, 3}, {2, 2, 2}, {300}, {10}};
  for (size_t k = 0; k < shapes.size(); ++k) a.declare(fmt::format("g{}", k), dtype, shapes[k]);
  a.allocate();
}

// Slot k of rank r: value(r, 900 + k, i) in the arena's dtype.
void fill_slots(const Arena& a, int rank) {
  for (size_t k = 0; k < a.entries().size(); ++k) {
    const Tensor t = a.get(static_cast<int>(k));
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = static_cast<float>(value(rank, 900 + static_cast<int>(k), i));
      if (t.dtype == DType::kBF16) static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(v); else static_cast<float*>(t.data)[i] = v;
    }
  }
}

bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

TEST(MpiZero, ReduceScatterIsTheAllReduceMeansShard) {
  for (auto& g : dp_groups()) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (size_t bucket_bytes : {size_t{200}, size_t{1000}, DpGradSync::kDefaultBucketBytes}) {
        const std::string what = fmt::format("dp {} {} buckets of {} bytes", g->size(), dtype_name(dtype), bucket_bytes);
        Arena plain("grads", Device::kCPU), sharded("grads", Device::kCPU), masters("params", Device::kCPU);
        declare_slots(plain, dtype);
        declare_slots(sharded, dtype);
        declare_slots(masters, dtype);
        fill_slots(plain, g->rank());
        fill_slots(sharded, g->rank());
        DpGradSync(*g, plain, bucket_bytes).all_reduce_mean();
        DpGradSync zero(*g, sharded, bucket_bytes, DpGradMode::kShardedMean);
        const int64_t es = static_cast<int64_t>(dtype_size(dtype)), total = static_cast<int64_t>(plain.bytes()) / es;
        for (int b = 0; b < zero.num_buckets(); ++b) {
          EXPECT_EQ(zero.bucket(b).flat.numel() % g->size(), 0) << what;
          EXPECT_EQ(zero.bucket(b).in_place, zero.bucket(b).count == zero.bucket(b).flat.numel()) << what;
        }
        const bool padded = total % g->size() != 0;
        EXPECT_EQ(!zero.bucket(zero.num_buckets() - 1).in_place, padded) << what;
        zero.all_reduce_mean();
        // Each rank's shard: the all-reduce mean's bits. The shards of all ranks cover the arena once.
        int64_t mine = 0;
        for (const auto& [off, n] : zero.shard_ranges()) {
          EXPECT_TRUE(same_bytes(static_cast<char*>(sharded.base()) + off * es,
                                 static_cast<char*>(plain.base()) + off * es, n * es))
              << what << ": shard at " << off;
          mine += n;
        }
        EXPECT_EQ(mine, zero.shard_numel());
        EXPECT_EQ(all_reduce_value(*g, static_cast<double>(mine), ReduceOp::kSum), static_cast<double>(total)) << what;
        // Gathering the shards of the gradients gives the whole mean (the padding between slots: zero).
        zero.all_gather_shards(sharded);
        EXPECT_TRUE(same_bytes(sharded.base(), plain.base(), plain.bytes())) << what;
        // Gathering another arena laid out so (the masters): rank r's chunks come from rank r.
        std::memset(masters.base(), 0xFF, masters.bytes());  // NaN where nothing arrives
        for (const auto& [off, n] : zero.shard_ranges())
          std::memcpy(static_cast<char*>(masters.base()) + off * es, static_cast<char*>(plain.base()) + off * es, n * es);
        zero.all_gather_shards(masters);
        EXPECT_TRUE(same_bytes(masters.base(), plain.base(), plain.bytes())) << what;
      }
    }
  }
}

// The backward's order: the last slots first, in groups, as Model::backward reports them.
void report_backward_order(DpGradSync& sync, int n_slots) {
  for (int end = n_slots; end > 0; end -= 2) sync.grads_ready(std::max(0, end - 2), end);
}

TEST(MpiZero, OverlappedSyncGivesTheSameBits) {
  for (auto& g : dp_groups()) {
    for (DpGradMode mode : {DpGradMode::kMean, DpGradMode::kShardedMean}) {
      Arena after("grads", Device::kCPU), overlapped("grads", Device::kCPU);
      declare_slots(after, DType::kF32);
      declare_slots(overlapped, DType::kF32);
      DpGradSync sync_after(*g, after, 300, mode), sync_overlapped(*g, overlapped, 300, mode);
      const int n_slots = static_cast<int>(after.entries().size());
      for (int step = 0; step < 3; ++step) {  // finish() starts each step afresh
        fill_slots(after, g->rank() + 10 * step);
        fill_slots(overlapped, g->rank() + 10 * step);
        sync_after.all_reduce_mean();
        report_backward_order(sync_overlapped, n_slots);
        sync_overlapped.finish();
        EXPECT_TRUE(same_bytes(after.base(), overlapped.base(), after.bytes()))
            << "dp " << g->size() << (mode == DpGradMode::kMean ? " mean" : " sharded") << " step " << step;
      }
    }
  }
}

// The backward's report (what the overlap hangs on): every slot once, its gradient then final (a
// copy taken at the report equals the gradient after the backward), the embedding last (tied: the
// LM head's gradient accumulates into it).
TEST(MpiZero, ModelReportsEverySlotOnceWhenFinal) {
  for (bool tied : {true, false}) {
    ModelConfig cfg = small_hybrid_config();
    cfg.tie_embeddings = tied;
    const int B = 2, T = 5;
    Model model(cfg, B, T);
    model.init(7);
    std::vector<int32_t> ids(B * T), targets(B * T);
    for (int i = 0; i < B * T; ++i) ids[i] = (5 * i + 3) % cfg.vocab_size, targets[i] = (7 * i + 1) % cfg.vocab_size;
    Context ctx;
    ParamStore& ps = model.params();
    std::vector<int> reported(ps.size(), 0);
    std::vector<std::vector<float>> at_report(ps.size());
    std::vector<int> firsts;
    model.forward(ctx, ids.data(), targets.data());
    model.backward(ctx, 1.0, [&](int first, int end) {
      firsts.push_back(first);
      for (int s = first; s < end; ++s) {
        ++reported[s];
        const Tensor g = ps.grad(s);
        at_report[s].assign(g.ptr<float>(), g.ptr<float>() + g.numel());
      }
    });
    for (int s = 0; s < ps.size(); ++s) {
      EXPECT_EQ(reported[s], 1) << ps.infos()[s].name;
      const Tensor g = ps.grad(s);
      EXPECT_TRUE(at_report[s] == std::vector<float>(g.ptr<float>(), g.ptr<float>() + g.numel()))
          << ps.infos()[s].name << (tied ? " (tied)" : "") << ": changed after it was reported final";
    }
    ASSERT_FALSE(firsts.empty());
    EXPECT_EQ(firsts.back(), 0);  // the embedding
    EXPECT_EQ(firsts.size(), cfg.layers.size() + (tied ? 2 : 3));  // head (untied), norm, blocks, embedding
  }
}

// ---- training ----

// A Layout (mpi_train_util.h) of tp x dp ranks with ZeRO-1 and the overlap on or off.
Layout layout(const SharedRunDir& dir, int tp, int dp, bool zero1, bool overlap, double bucket_mb = 0.016) {
  Layout l{small_train_config(dir, tp, dp), tp * dp};
  Config& c = l.cfg;
  c.parallel.zero1 = zero1;
  c.parallel.overlap_grad_sync = overlap;
  c.parallel.bucket_mb = bucket_mb;  // 16 KiB: several buckets for this model (60-100 KiB of gradients)
  return l;
}

// Overlap and ZeRO-1 against the plain sync after the backward, at the same layout. Overlap: the
// same bits. ZeRO-1: the same gradients and updates element by element, but the gradient norm is
// summed in another order (per shard, then over the ranks), so it may differ in the last bits of a
// double (1e-12 relative), and the clipping factor with it: a weight rounds differently only when a
// product lands within 1e-16 of a float rounding boundary, which these 4 steps never meet, so the
// losses are compared bit for bit. If a future change trips that, 1e-6 relative is the honest bound.
void check_layouts(const std::vector<std::pair<int, int>>& layouts) {
  SharedRunDir dir("zero_layouts");
  for (auto [tp, dp] : layouts) {
    const std::string at = fmt::format("tp {} x dp {}", tp, dp);
    const std::string plain = run(dir, "plain" + at, layout(dir, tp, dp, false, false));
    const std::string overlap = run(dir, "overlap" + at, layout(dir, tp, dp, false, true));
    const std::string zero = run(dir, "zero1" + at, layout(dir, tp, dp, true, true));
    // Once also with one 25 MiB bucket (the default) and no overlap.
    std::vector<std::string> zeros = {zero};
    if (tp == layouts.front().first && dp == layouts.front().second)
      zeros.push_back(run(dir, "zero1_25mb" + at, layout(dir, tp, dp, true, false, 25)));
    if (world().rank() == 0) {
      for (const char* key : {"loss", "grad_norm", "val_loss"}) expect_metric(overlap, plain, key, 0, at + " overlap");
      for (const std::string& z : zeros) {
        expect_metric(z, plain, "loss", 0, at + " zero1");
        expect_metric(z, plain, "val_loss", 0, at + " zero1");
        expect_metric(z, plain, "grad_norm", 1e-12, at + " zero1");
      }
    }
    world().barrier();
  }
}

TEST(MpiZeroTrainer, OverlapAndZeroOneRepeatThePlainCurve) {
  const int n = world().size();
  if (n == 4) check_layouts({{1, 4}, {2, 2}, {1, 3}});  // dp 3: the padded last bucket
  else check_layouts({{1, n}});
}

// A NaN in the gradients of the last rank only (all of them, at step 2): under ZeRO-1 it reaches the
// other ranks through the norm (summed over DP), and every rank skips that update together.
TEST(MpiZeroTrainer, ANanOnOneRankSkipsTheStepEverywhere) {
  SharedRunDir dir("zero_nan");
  const int n = world().size();
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / "nan";
  o.after_backward = [&](int step, ParamStore& params) {
    if (step != 2 || world().rank() != n - 1) return;
    Arena& g = params.grads_arena();
    std::fill(static_cast<float*>(g.base()), static_cast<float*>(g.base()) + g.bytes() / 4, std::nanf(""));
  };
  train_on_first(n, layout(dir, 1, n, true, true).cfg, o);
  if (world().rank() == 0) {
    std::ifstream in(o.run_dir + "/metrics.jsonl");
    std::string line;
    std::map<int, bool> skipped;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) skipped[j["step"].get<int>()] = j.value("skipped", false);
    }
    EXPECT_EQ(skipped, (std::map<int, bool>{{1, false}, {2, true}, {3, false}, {4, false}}));
  }
  world().barrier();
}

// The keys: defaults, checks, and parallel.timeout_s reaching the communicators the trainer makes
// (its own world here: TrainOptions::world left empty).
TEST(MpiZeroTrainer, ParallelKeysReachTheRun) {
  const Config d = default_config();
  EXPECT_FALSE(d.parallel.zero1);
  EXPECT_TRUE(d.parallel.overlap_grad_sync);
  EXPECT_EQ(d.parallel.bucket_mb, 25.0);
  EXPECT_EQ(d.parallel.timeout_s, 600.0);
  for (const char* bad : {"parallel.timeout_s=0", "parallel.timeout_s=-1", "parallel.bucket_mb=0"}) {
    try {
      parse_config("", {bad});
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos)
          << e.what();
    }
  }
  const Config c = parse_config("parallel: {zero1: true, overlap_grad_sync: false, bucket_mb: 0.5, timeout_s: 7}");
  EXPECT_TRUE(c.parallel.zero1);
  EXPECT_FALSE(c.parallel.overlap_grad_sync);
  EXPECT_EQ(c.parallel.bucket_mb, 0.5);
  EXPECT_EQ(c.parallel.timeout_s, 7.0);

  SharedRunDir dir("zero_keys");
  const int n = world().size();
  Config cfg = layout(dir, 1, n, true, true).cfg;
  cfg.parallel.timeout_s = 7;
  cfg.train.steps = 1;
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / "keys";
  train(cfg, o);  // every rank, on the world it makes itself
  if (world().rank() == 0) {
    std::ifstream in(o.run_dir + "/log.txt");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find(fmt::format("{} ranks = tp 1 x dp {} (mpi backend, collective timeout 7 s)", n, n)),
              std::string::npos) << text.str();
    EXPECT_NE(text.str().find("reduce-scattered (ZeRO-1), overlapped with the backward"), std::string::npos)
        << text.str();
  }
  world().barrier();
}

// Saved with ZeRO-1, resumed without it and the other way round, also under another TP layout: the
// curve of the straight run without ZeRO-1 (bitwise at the same layout; 1e-5 across TP layouts,
// whose sums differ in order, as in test_mpi_tp.cpp).
TEST(MpiZeroTrainer, ResumeBetweenZeroOneAndPlain) {
  SharedRunDir dir("zero_resume");
  const int n = world().size();
  auto config = [&](int tp, int dp, bool zero1, int steps) {
    Layout l = layout(dir, tp, dp, zero1, true);
    l.cfg.train.checkpoint_every = 2;
    l.cfg.train.steps = steps;
    return l;
  };
  struct Case {
    int save_tp, save_dp;
    bool save_zero1;
    int load_tp, load_dp;
    bool load_zero1;
  };
  std::vector<Case> cases = {{1, n, true, 1, n, false}, {1, n, false, 1, n, true}};
  if (n == 4) {
    cases.push_back({2, 2, true, 1, 2, true});   // world of 4 to the first 2 ranks
    cases.push_back({1, 2, false, 2, 2, true});  // and back, plain to ZeRO-1
  }
  std::map<int, std::string> straight;  // dp -> the straight plain run at tp 1
  int k = 0;
  for (const Case& c : cases) {
    if (!straight.count(c.load_dp))
      straight[c.load_dp] = run(dir, fmt::format("straight_dp{}", c.load_dp), config(1, c.load_dp, false, 4));
    const std::string name = fmt::format("case{}", k++);
    run(dir, name, config(c.save_tp, c.save_dp, c.save_zero1, 2));
    const std::string resumed = run(dir, name, config(c.load_tp, c.load_dp, c.load_zero1, 4), /*resume=*/true);
    if (world().rank() == 0) {
      const std::string what = fmt::format("saved at tp {} x dp {}{}, resumed at tp {} x dp {}{}", c.save_tp, c.save_dp,
                                           c.save_zero1 ? " zero1" : "", c.load_tp, c.load_dp,
                                           c.load_zero1 ? " zero1" : "");
      const double tol = c.save_tp == 1 && c.load_tp == 1 ? 0 : 1e-5;
      expect_metric(resumed, straight[c.load_dp], "loss", tol, what);
      expect_metric(resumed, straight[c.load_dp], "val_loss", tol, what);
    }
    world().barrier();
  }
}

}  // namespace
}  // namespace dt::mpitest
