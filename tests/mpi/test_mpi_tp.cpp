// Tensor parallelism inside the layers and data parallelism in the trainer against one process
// (DESIGN section 6): the same step of a hybrid GDN + GQA + MLA model under TP = world size gives
// the loss and every gradient of TP = 1 within 1e-5 relative (fp32); whole training runs under
// every TP x DP layout of the world repeat the single-process curve, and a checkpoint saved under
// one layout resumes under another.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "data/shard.h"
#include "kernels/ops.h"
#include "layers/model.h"
#include "tests/mpi/mpi_test_util.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace dt::mpitest {
namespace {

namespace fs = std::filesystem;

// Four mixers (two GDN with Hv = 2 Hk, GQA with 2 query heads per KV head, q/k norms and the output
// gate, MLA with a low-rank query) and sizes that split over 1, 2 and 4 ranks; odd T, partial chunk.
ModelConfig hybrid_config(bool tied, int q_lora_rank) {
  ModelConfig m;
  m.vocab_size = 64;
  m.d_model = 24;
  m.d_ff = 40;
  m.layers = {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla, MixerKind::kGdn};
  m.tie_embeddings = tied;
  m.attn = {.n_heads = 8, .n_kv_heads = 4, .head_dim = 6, .rotary_dim = 4, .rope_theta = 10000.0, .qk_norm = true,
            .output_gate = true};
  m.mla = {.n_heads = 4, .q_lora_rank = q_lora_rank, .kv_lora_rank = 10, .qk_nope_head_dim = 4,
           .qk_rope_head_dim = 4, .v_head_dim = 6, .rope_theta = 10000.0, .rope_interleave = true};
  m.gdn = {.n_k_heads = 4, .n_v_heads = 8, .head_k_dim = 6, .head_v_dim = 4, .conv_kernel = 4, .chunk_size = 4};
  return m;
}

// ||a - b|| / ||b|| (0 when both are 0).
double rel_err(const float* a, const float* b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return r == 0 ? std::sqrt(d) : std::sqrt(d / r);
}

// One forward and backward of a TP = tp model (a TP group of `tp` adjacent world ranks) against the
// same step of a one-process model on every rank.
void check_tp_step(const ModelConfig& cfg, int tp) {
  Communicator& w = world();
  if (w.size() % tp != 0) return;
  auto group = w.split(w.rank() / tp, w.rank() % tp, "tp");
  const int B = 2, T = 7;
  std::vector<int32_t> ids(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = static_cast<int32_t>(philox_uniform(71, 1, i) * cfg.vocab_size);
    targets[i] = static_cast<int32_t>(philox_uniform(71, 2, i) * cfg.vocab_size);
  }
  Model ref(cfg, B, T);
  ref.init(5);
  Context ref_ctx;
  const double ref_loss = ref.forward(ref_ctx, ids.data(), targets.data());
  ref.backward(ref_ctx, 0.5);

  Model m(cfg, B, T, DType::kF32, Device::kCPU, TpLayout{group->rank(), tp});
  m.init(5);
  Context ctx;
  ctx.tp = group.get();
  ParamStore& ps = m.params();
  for (int s = 0; s < ps.size(); ++s) {  // poison the gradients the backward accumulates into: NaN shows
    Tensor g = ps.grad(s);
    std::fill(g.ptr<float>(), g.ptr<float>() + g.numel(), 0.0f);
  }
  const double loss = m.forward(ctx, ids.data(), targets.data());
  m.backward(ctx, 0.5);
  for (int s = 0; s < ps.size(); ++s)  // as the trainer does before the update
    if (ps.infos()[s].tp_partial_grad) group->all_reduce(ps.grad(s));

  EXPECT_LE(std::abs(loss - ref_loss), 1e-5 * std::abs(ref_loss)) << "tp " << tp << ": " << loss << " vs " << ref_loss;
  ASSERT_EQ(ps.size(), ref.params().size());
  int split = 0;
  for (int s = 0; s < ps.size(); ++s) {
    const ParamInfo& info = ps.infos()[s];
    ASSERT_EQ(info.name, ref.params().infos()[s].name);
    EXPECT_EQ(info.full_shape, ref.params().infos()[s].shape) << info.name;
    split += info.shape.numel() != info.full_shape.numel();
    std::vector<float> want(info.shape.numel()), param(info.shape.numel());
    tp_copy_part(info, {group->rank(), tp}, ref.params().grad(s).data, want.data(), sizeof(float), true);
    const double e = rel_err(ps.grad(s).ptr<float>(), want.data(), info.shape.numel());
    EXPECT_LE(e, 1e-5) << "tp " << tp << " rank " << group->rank() << ": gradient of " << info.name;
    // The parts start from the one-process model's values.
    tp_copy_part(info, {group->rank(), tp}, ref.params().master(s).data, param.data(), sizeof(float), true);
    EXPECT_EQ(rel_err(ps.master(s).ptr<float>(), param.data(), info.shape.numel()), 0.0) << info.name;
  }
  if (tp > 1) {
    EXPECT_GT(split, 20) << "the layers hold their parts";
  }
}

TEST(MpiTensorParallel, HybridStepMatchesOneProcess) {
  for (int tp : {2, 4}) check_tp_step(hybrid_config(/*tied=*/true, /*q_lora_rank=*/12), tp);
}

TEST(MpiTensorParallel, UntiedHeadAndDirectMlaQuery) {
  for (int tp : {2, 4}) check_tp_step(hybrid_config(/*tied=*/false, /*q_lora_rank=*/0), tp);
}

// ---- the trainer ----

// A directory every rank names the same (rank 0's pid), removed by rank 0 at the end.
class SharedDir {
 public:
  explicit SharedDir(const char* what) {
    int32_t pid = static_cast<int32_t>(::getpid());
    world().broadcast(Tensor(&pid, DType::kI32, Device::kCPU, {1}), 0);
    path_ = fs::temp_directory_path() / fmt::format("dt_mpi_{}_{}", what, pid);
    if (world().rank() == 0) {
      fs::remove_all(path_);
      fs::create_directories(path_);
    }
    world().barrier();
  }
  ~SharedDir() {
    world().barrier();
    std::error_code ec;
    if (world().rank() == 0) fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

Config train_config(const std::string& dir, int tp, int dp) {
  Config c = default_config();
  c.model = hybrid_config(true, 12);
  c.data.train = dir + "/tp_train_*.bin";
  c.data.val = dir + "/tp_val_*.bin";
  c.train.batch_size = 4 / dp;  // a global batch of 4 sequences for every layout
  c.train.seq_len = 9;
  c.train.steps = 4;
  c.train.warmup_steps = 1;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-3;
  c.train.grad_clip = 0.5;  // clipping is on: the norm must count every parameter once
  c.train.eval_every = 2;
  c.train.eval_batches = 1;
  c.train.checkpoint_every = 0;
  c.run.threads = 1;
  c.parallel.tp = tp;
  return c;
}

void write_shards(const std::string& dir) {
  if (world().rank() == 0) {
    std::vector<uint16_t> train(2000), val(400);
    for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((7 * i + (i / 13) * 3) % 61);
    for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>((5 * i + 11) % 61);
    write_shard(dir + "/tp_train_000001.bin", train);
    write_shard(dir + "/tp_val_000000.bin", val);
  }
  world().barrier();
}

// key -> step -> value from <run>/metrics.jsonl (read on rank 0).
std::map<int, double> metric(const std::string& run_dir, const char* key) {
  std::map<int, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key) && !j[key].is_null()) out[j["step"].get<int>()] = j[key].get<double>();
  }
  return out;
}

void expect_close(const std::map<int, double>& got, const std::map<int, double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (auto [step, v] : want) {
    ASSERT_TRUE(got.count(step)) << what << " step " << step;
    EXPECT_LE(std::abs(got.at(step) - v), tol * std::abs(v)) << what << " step " << step << ": " << got.at(step)
                                                             << " vs " << v;
  }
}

// Runs `cfg` on a world of one (rank 0 alone; the others wait).
void train_alone(const Config& cfg, TrainOptions o) {
  auto solo = world().split(world().rank(), 0, "solo");
  if (world().rank() == 0) {
    o.world = solo.get();
    train(cfg, o);
  }
  world().barrier();
}

// Every TP x DP layout of the world gives the one-process curve (loss, gradient norm, val loss).
TEST(MpiTrainer, EveryLayoutRepeatsTheOneProcessCurve) {
  SharedDir dir("layouts");
  write_shards(dir / "");
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / "ref";
  train_alone(train_config(dir / "", 1, 1), o);
  for (int tp = 1; tp <= world().size(); tp *= 2) {
    const int dp = world().size() / tp;
    o.run_dir = dir / fmt::format("tp{}_dp{}", tp, dp);
    o.world = &world();
    train(train_config(dir / "", tp, dp), o);
    if (world().rank() == 0) {
      const std::string what = fmt::format("tp {} x dp {}", tp, dp);
      expect_close(metric(o.run_dir, "loss"), metric(dir / "ref", "loss"), 1e-5, what + " loss");
      expect_close(metric(o.run_dir, "grad_norm"), metric(dir / "ref", "grad_norm"), 1e-4, what + " grad_norm");
      expect_close(metric(o.run_dir, "val_loss"), metric(dir / "ref", "val_loss"), 1e-5, what + " val_loss");
    }
    world().barrier();
  }
}

// Saved under one layout, resumed under another: the same curve as one straight run.
TEST(MpiTrainer, ResumeAcrossLayouts) {
  SharedDir dir("resume");
  write_shards(dir / "");
  const int n = world().size();
  // A constant learning rate after the warm-up: the schedule then does not depend on train.steps.
  auto config = [&](int tp, int dp) {
    Config c = train_config(dir / "", tp, dp);
    c.train.min_lr = c.train.lr;
    c.train.checkpoint_every = 2;  // a resume must match the checkpoint's train keys
    return c;
  };
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / "straight";
  train_alone(config(1, 1), o);
  // (save layout, resume layout): TP = n to TP = 1 and back. (DP cannot change on resume: the
  // per-rank train.batch_size must match the checkpoint's.)
  const std::pair<std::pair<int, int>, std::pair<int, int>> cases[] = {{{n, 1}, {1, 1}}, {{1, 1}, {n, 1}}};
  int k = 0;
  for (auto [save, load] : cases) {
    const std::string run = dir / fmt::format("case{}", k++);
    Config first = config(save.first, save.second);
    first.train.steps = 2;
    o.run_dir = run;
    if (save.first * save.second == 1) train_alone(first, o); else { o.world = &world(); train(first, o); }
    Config second = config(load.first, load.second);
    o.resume = true;
    if (load.first * load.second == 1) train_alone(second, o); else { o.world = &world(); train(second, o); }
    o.resume = false;
    if (world().rank() == 0) {
      const std::string what = fmt::format("saved at tp {} x dp {}, resumed at tp {} x dp {}", save.first,
                                           save.second, load.first, load.second);
      expect_close(metric(run, "loss"), metric(dir / "straight", "loss"), 1e-5, what);
    }
    world().barrier();
  }
}

}  // namespace
}  // namespace dt::mpitest
