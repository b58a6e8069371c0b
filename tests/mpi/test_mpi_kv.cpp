// Fewer attention KV heads than TP ranks (KV heads replicated, layers/attention.h) under mpirun: a
// hybrid GDN + GQA + MLA step at TP = 2 and 4 with n_kv_heads = 1 and 2 gives the loss and every
// gradient of TP = 1 within 1e-5 relative (fp32); the trainer's curve (loss and gradient norm, which
// must count the replicated k_proj / v_proj once) repeats the one-process one; a checkpoint saved with
// replicated KV heads resumes under TP = 1 and back.
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
#include "layers/model.h"
#include "tests/mpi/mpi_test_util.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace dt::mpitest {
namespace {

namespace fs = std::filesystem;

// GDN (Hv = 2 Hk, 4 key heads: whole heads on up to 4 ranks), gated GQA with q/k norms and 8 query
// heads over `kv_heads` KV heads, MLA; odd T, a partial GDN chunk.
ModelConfig kv_config(int kv_heads) {
  ModelConfig m;
  m.vocab_size = 64;
  m.d_model = 24;
  m.d_ff = 40;
  m.layers = {MixerKind::kAttn, MixerKind::kGdn, MixerKind::kMla, MixerKind::kAttn};
  m.tie_embeddings = false;
  m.attn = {.n_heads = 8, .n_kv_heads = kv_heads, .head_dim = 6, .rotary_dim = 4, .rope_theta = 10000.0,
            .qk_norm = true, .output_gate = true};
  m.mla = {.n_heads = 4, .q_lora_rank = 12, .kv_lora_rank = 10, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4,
           .v_head_dim = 6, .rope_theta = 10000.0, .rope_interleave = true};
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

// One forward and backward at TP = tp (groups of `tp` adjacent world ranks) against one process.
void check_kv_step(int kv_heads, int tp) {
  Communicator& w = world();
  if (w.size() % tp != 0) return;
  SCOPED_TRACE(fmt::format("n_kv_heads {}, tp {}", kv_heads, tp));
  const ModelConfig cfg = kv_config(kv_heads);
  auto group = w.split(w.rank() / tp, w.rank() % tp, "tp");
  const int B = 2, T = 7;
  std::vector<int32_t> ids(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    ids[i] = static_cast<int32_t>(philox_uniform(73, 1, i) * cfg.vocab_size);
    targets[i] = static_cast<int32_t>(philox_uniform(73, 2, i) * cfg.vocab_size);
  }
  Model ref(cfg, B, T);
  ref.init(9);
  Context ref_ctx;
  const double ref_loss = ref.forward(ref_ctx, ids.data(), targets.data());
  ref.backward(ref_ctx, 0.5);

  Model m(cfg, B, T, DType::kF32, Device::kCPU, TpLayout{group->rank(), tp});
  m.init(9);
  Context ctx;
  ctx.tp = group.get();
  ParamStore& ps = m.params();
  const double loss = m.forward(ctx, ids.data(), targets.data());
  m.backward(ctx, 0.5);
  for (int s = 0; s < ps.size(); ++s)  // as the trainer does before the update
    if (ps.infos()[s].tp_partial_grad) group->all_reduce(ps.grad(s));

  EXPECT_LE(std::abs(loss - ref_loss), 1e-5 * std::abs(ref_loss)) << loss << " vs " << ref_loss;
  ASSERT_EQ(ps.size(), ref.params().size());
  int replicated_kv = 0;
  for (int s = 0; s < ps.size(); ++s) {
    const ParamInfo& info = ps.infos()[s];
    ASSERT_EQ(info.name, ref.params().infos()[s].name);
    const bool kv = info.name.find("k_proj") != std::string::npos || info.name.find("v_proj") != std::string::npos;
    replicated_kv += kv && info.split == TpSplit::kReplicated;
    std::vector<float> want(info.shape.numel());
    tp_copy_part(info, {group->rank(), tp}, ref.params().grad(s).data, want.data(), sizeof(float), true);
    EXPECT_LE(rel_err(ps.grad(s).ptr<float>(), want.data(), info.shape.numel()), 1e-5)
        << "rank " << group->rank() << ": gradient of " << info.name;
  }
  // Two attention layers, k_proj and v_proj each: replicated exactly when there are fewer KV heads than ranks.
  EXPECT_EQ(replicated_kv, kv_heads < tp ? 4 : 0);
}

TEST(MpiKvReplication, OneKvHeadMatchesOneProcess) {
  for (int tp : {2, 4}) check_kv_step(1, tp);
}

TEST(MpiKvReplication, TwoKvHeadsMatchOneProcess) {
  for (int tp : {2, 4}) check_kv_step(2, tp);  // tp 2: split as usual; tp 4: replicated on pairs of ranks
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

// A constant learning rate after the warm-up (the schedule then does not depend on train.steps),
// clipping on (the norm must count the replicated KV projections once), a checkpoint every 2 steps.
Config kv_train_config(const std::string& dir, int tp) {
  Config c = default_config();
  c.model = kv_config(1);
  c.data.train = dir + "/kv_train_*.bin";
  c.data.val = dir + "/kv_val_*.bin";
  c.train.batch_size = 4;
  c.train.seq_len = 9;
  c.train.steps = 4;
  c.train.warmup_steps = 1;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-2;
  c.train.grad_clip = 0.5;
  c.train.eval_every = 0;
  c.train.eval_batches = 0;
  c.train.checkpoint_every = 2;
  c.run.threads = 1;
  c.parallel.tp = tp;
  return c;
}

void write_shards(const std::string& dir) {
  if (world().rank() == 0) {
    std::vector<uint16_t> train(2000), val(400);
    for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((11 * i + (i / 7) * 5) % 63);
    for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>((3 * i + 1) % 63);
    write_shard(dir + "/kv_train_000001.bin", train);
    write_shard(dir + "/kv_val_000000.bin", val);
  }
  world().barrier();
}

// step -> value of `key` in <run>/metrics.jsonl (read on rank 0).
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

void expect_close(const std::map<int, double>& got, const std::map<int, double>& want, double tol,
                  const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  for (auto [step, v] : want) {
    if (!got.count(step)) {
      ADD_FAILURE() << what << ": no step " << step;
      continue;
    }
    EXPECT_LE(std::abs(got.at(step) - v), tol * std::abs(v)) << what << " step " << step << ": " << got.at(step)
                                                             << " vs " << v;
  }
}

// Trains `cfg` on the whole world (tp > 1) or on world rank 0 alone (tp = 1; the others wait).
void train_on(const Config& cfg, TrainOptions o) {
  if (cfg.parallel.tp > 1) {
    o.world = &world();
    train(cfg, o);
    return;
  }
  auto solo = world().split(world().rank(), 0, "solo");
  if (world().rank() == 0) {
    o.world = solo.get();
    train(cfg, o);
  }
  world().barrier();
}

// TP = world size with one KV head (replicated on every rank): the one-process curve; saved there and
// resumed under TP = 1, and saved under TP = 1 and resumed there: the straight run's losses.
TEST(MpiKvReplication, TrainerCurveAndResumeAcrossLayouts) {
  const int n = world().size();
  SharedDir dir("kv");
  write_shards(dir / "");
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / "straight";
  train_on(kv_train_config(dir / "", 1), o);
  o.run_dir = dir / "tp";
  train_on(kv_train_config(dir / "", n), o);
  if (world().rank() == 0) {
    expect_close(metric(dir / "tp", "loss"), metric(dir / "straight", "loss"), 1e-5, fmt::format("tp {} loss", n));
    expect_close(metric(dir / "tp", "grad_norm"), metric(dir / "straight", "grad_norm"), 1e-4,
                 fmt::format("tp {} grad_norm", n));
  }
  world().barrier();
  const std::pair<int, int> cases[] = {{n, 1}, {1, n}};  // (save layout, resume layout)
  for (auto [save, load] : cases) {
    const std::string run = dir / fmt::format("save{}_load{}", save, load);
    Config first = kv_train_config(dir / "", save);
    first.train.steps = 2;
    o.run_dir = run;
    train_on(first, o);
    o.resume = true;
    train_on(kv_train_config(dir / "", load), o);
    o.resume = false;
    if (world().rank() == 0)
      expect_close(metric(run, "loss"), metric(dir / "straight", "loss"), 1e-5,
                   fmt::format("saved at tp {}, resumed at tp {}", save, load));
    world().barrier();
  }
}

}  // namespace
}  // namespace dt::mpitest
