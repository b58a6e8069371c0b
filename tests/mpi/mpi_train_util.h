// Shared by the TP / DP tests under mpirun (tests/mpi/test_mpi_tp.cpp, test_mpi_kv.cpp,
// test_mpi_zero.cpp): a small hybrid model; one step of it under TP against one process; and for
// training runs, shards every rank reads, a run directory every rank names the same, training on
// the first k ranks of the world, and the metrics of a run read back and compared.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "layers/model.h"
#include "tests/mpi/mpi_test_util.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace dt::mpitest {

// Four mixers (two GDN with Hv = 2 Hk, GQA with 2 query heads per KV head, q/k norms (TP-partial
// gradients) and the output gate, MLA with a low-rank query unless q_lora_rank = 0) and sizes that
// split over 1, 2 and 4 ranks.
inline ModelConfig small_hybrid_config(bool tied = true, int q_lora_rank = 12) {
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

// ---- one step under TP against one process ----

// ||a - b|| / ||b|| (0 when both are 0).
inline double rel_err(const float* a, const float* b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return r == 0 ? std::sqrt(d) : std::sqrt(d / r);
}

// The same forward and backward (B = 2, T = 7: odd T, a partial GDN chunk; Philox tokens from
// `data_seed`) of a one-process model (`ref`, on every rank) and of a TP = tp model (`model`, on a
// TP group of `tp` adjacent world ranks), both initialised from `init_seed`; then the TP model's
// partial gradients summed over TP, as the trainer does before the update. Collective: every rank
// makes one, and only where tp divides the world size.
class TpStep {
 public:
  static constexpr int B = 2, T = 7;

  TpStep(const ModelConfig& cfg, int tp_size, uint64_t data_seed, uint64_t init_seed)
      : tp(tp_size),
        group(world().split(world().rank() / tp_size, world().rank() % tp_size, "tp")),
        ref(cfg, B, T),
        model(cfg, B, T, DType::kF32, Device::kCPU, TpLayout{group->rank(), tp_size}) {
    std::vector<int32_t> ids(B * T), targets(B * T);
    for (int i = 0; i < B * T; ++i) {
      ids[i] = static_cast<int32_t>(philox_uniform(data_seed, 1, i) * cfg.vocab_size);
      targets[i] = static_cast<int32_t>(philox_uniform(data_seed, 2, i) * cfg.vocab_size);
    }
    ref.init(init_seed);
    Context ref_ctx;
    ref_loss = ref.forward(ref_ctx, ids.data(), targets.data());
    ref.backward(ref_ctx, 0.5);

    model.init(init_seed);
    Context ctx;
    ctx.tp = group.get();
    ParamStore& ps = model.params();
    ps.zero_grads();  // the backward accumulates into the gradients
    loss = model.forward(ctx, ids.data(), targets.data());
    model.backward(ctx, 0.5);
    for (int s = 0; s < ps.size(); ++s)  // as the trainer does before the update
      if (ps.infos()[s].tp_partial_grad) group->all_reduce(ps.grad(s));
  }

  // This rank's part of `full`, slot s's gradient or parameter in the one-process model.
  std::vector<float> part_of(int s, const Tensor& full) const {
    const ParamInfo& info = model.params().infos()[s];
    std::vector<float> part(info.shape.numel());
    tp_copy_part(info, {group->rank(), tp}, full.data, part.data(), sizeof(float), true);
    return part;
  }

  const int tp;
  const std::unique_ptr<Communicator> group;
  Model ref, model;
  double ref_loss = 0, loss = 0;
};

// ---- training runs ----

// Token i of the shards a SharedRunDir writes: 2000 train tokens and 400 validation tokens.
struct ShardTokens {
  uint16_t (*train)(size_t i);
  uint16_t (*val)(size_t i);
};
inline uint16_t default_train_token(size_t i) { return static_cast<uint16_t>((7 * i + (i / 13) * 3) % 61); }
inline uint16_t default_val_token(size_t i) { return static_cast<uint16_t>((5 * i + 11) % 61); }
inline constexpr ShardTokens kDefaultShardTokens = {default_train_token, default_val_token};

// A directory every rank names the same (rank 0's pid) holding the shards z_train_000001.bin and
// z_val_000000.bin, removed by rank 0 at the end.
class SharedRunDir {
 public:
  explicit SharedRunDir(const char* what, ShardTokens tokens = kDefaultShardTokens) {
    int32_t pid = static_cast<int32_t>(::getpid());
    world().broadcast(Tensor(&pid, DType::kI32, Device::kCPU, {1}), 0);
    path_ = std::filesystem::temp_directory_path() / fmt::format("dt_mpi_{}_{}", what, pid);
    if (world().rank() == 0) {
      std::filesystem::remove_all(path_);
      std::filesystem::create_directories(path_);
      std::vector<uint16_t> train(2000), val(400);
      for (size_t i = 0; i < train.size(); ++i) train[i] = tokens.train(i);
      for (size_t i = 0; i < val.size(); ++i) val[i] = tokens.val(i);
      write_shard((path_ / "z_train_000001.bin").string(), train);
      write_shard((path_ / "z_val_000000.bin").string(), val);
      write_manifest((path_ / "z.manifest.json").string(), manifest_of_files(path_.string(), "z"));
    }
    world().barrier();
  }
  ~SharedRunDir() {
    world().barrier();
    std::error_code ec;
    if (world().rank() == 0) std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// 4 steps of a global batch of `global_batch` sequences (global_batch / dp per DP rank), a constant
// learning rate after the warm-up (a resumed run's schedule then does not depend on train.steps),
// clipping on (the norm must count every parameter once), an evaluation every 2 steps.
inline Config small_train_config(const SharedRunDir& dir, int tp, int dp, int global_batch = 12) {
  Config c = default_config();
  c.model = small_hybrid_config();
  c.data.train = dir / "z_train_*.bin";
  c.data.val = dir / "z_val_*.bin";
  c.train.batch_size = global_batch / dp;
  c.train.seq_len = 9;
  c.train.steps = 4;
  c.train.warmup_steps = 1;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-2;
  c.train.grad_clip = 0.5;
  c.train.eval_every = 2;
  c.train.eval_batches = 1;
  c.train.checkpoint_every = 0;
  c.run.threads = 1;
  c.parallel.tp = tp;
  return c;
}

// Trains `cfg` on world ranks [0, k) (a communicator of their own); the other ranks wait.
inline void train_on_first(int k, const Config& cfg, TrainOptions o) {
  auto group = world().split(world().rank() < k ? 0 : 1, world().rank(), "first");
  if (world().rank() < k) {
    o.world = k == world().size() ? &world() : group.get();
    train(cfg, o);
  }
  world().barrier();
}

// A run on the first tp x dp ranks.
struct Layout {
  Config cfg;
  int ranks;
};

// Runs it into <dir>/<name> (resume: continues the run there); returns that directory.
inline std::string run(const SharedRunDir& dir, const std::string& name, const Layout& l, bool resume = false) {
  TrainOptions o;
  o.console = nullptr;
  o.run_dir = dir / name;
  o.resume = resume;
  train_on_first(l.ranks, l.cfg, o);
  return o.run_dir;
}

// Runs `save` for its first `save_steps` steps into <dir>/<name>, then resumes it there under
// `load`; returns that directory.
inline std::string run_and_resume(const SharedRunDir& dir, const std::string& name, Layout save, int save_steps,
                                  const Layout& load) {
  save.cfg.train.steps = save_steps;
  run(dir, name, save);
  return run(dir, name, load, /*resume=*/true);
}

// step -> value of `key` in <run>/metrics.jsonl (read on rank 0).
inline std::map<int, double> run_metric(const std::string& run_dir, const char* key) {
  std::map<int, double> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key) && !j[key].is_null()) out[j["step"].get<int>()] = j[key].get<double>();
  }
  return out;
}

// Every step's value within rel_tol (0: the same bits; metrics.jsonl writes doubles so that they
// read back exactly).
inline void expect_metric(const std::string& got_run, const std::string& want_run, const char* key, double rel_tol,
                          const std::string& what) {
  const std::map<int, double> got = run_metric(got_run, key), want = run_metric(want_run, key);
  ASSERT_EQ(got.size(), want.size()) << what << " " << key;
  ASSERT_FALSE(want.empty()) << what << " " << key;
  for (auto [step, v] : want) {
    ASSERT_TRUE(got.count(step)) << what << " " << key << " step " << step;
    if (rel_tol == 0)
      EXPECT_EQ(got.at(step), v) << what << " " << key << " step " << step;
    else
      EXPECT_LE(std::abs(got.at(step) - v), rel_tol * std::abs(v))
          << what << " " << key << " step " << step << ": " << got.at(step) << " vs " << v;
  }
}

}  // namespace dt::mpitest
