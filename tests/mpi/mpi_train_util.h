// Training runs under mpirun for the data-parallel tests (tests/mpi/test_mpi_zero.cpp): a small
// hybrid model, shards every rank reads, a run directory every rank names the same, training on the
// first k ranks of the world, and the metrics of a run read back.
#pragma once

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

#include "data/shard.h"
#include "tests/mpi/mpi_test_util.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace dt::mpitest {

// GDN (Hv = 2 Hk), GQA with q/k norms (TP-partial gradients) and MLA; sizes that split over TP 2.
inline ModelConfig small_hybrid_config() {
  ModelConfig m;
  m.vocab_size = 64;
  m.d_model = 24;
  m.d_ff = 40;
  m.layers = {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla, MixerKind::kGdn};
  m.tie_embeddings = true;
  m.attn = {.n_heads = 8, .n_kv_heads = 4, .head_dim = 6, .rotary_dim = 4, .rope_theta = 10000.0, .qk_norm = true,
            .output_gate = true};
  m.mla = {.n_heads = 4, .q_lora_rank = 12, .kv_lora_rank = 10, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4,
           .v_head_dim = 6, .rope_theta = 10000.0, .rope_interleave = true};
  m.gdn = {.n_k_heads = 4, .n_v_heads = 8, .head_k_dim = 6, .head_v_dim = 4, .conv_kernel = 4, .chunk_size = 4};
  return m;
}

// A directory every rank names the same (rank 0's pid), removed by rank 0 at the end.
class SharedRunDir {
 public:
  explicit SharedRunDir(const char* what) {
    int32_t pid = static_cast<int32_t>(::getpid());
    world().broadcast(Tensor(&pid, DType::kI32, Device::kCPU, {1}), 0);
    path_ = std::filesystem::temp_directory_path() / fmt::format("dt_mpi_{}_{}", what, pid);
    if (world().rank() == 0) {
      std::filesystem::remove_all(path_);
      std::filesystem::create_directories(path_);
      std::vector<uint16_t> train(2000), val(400);
      for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((7 * i + (i / 13) * 3) % 61);
      for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>((5 * i + 11) % 61);
      write_shard((path_ / "z_train_000001.bin").string(), train);
      write_shard((path_ / "z_val_000000.bin").string(), val);
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

// 4 steps of a global batch of 12 sequences (batch_size 12 / dp per DP rank), clipping on.
inline Config small_train_config(const SharedRunDir& dir, int tp, int dp) {
  Config c = default_config();
  c.model = small_hybrid_config();
  c.data.train = dir / "z_train_*.bin";
  c.data.val = dir / "z_val_*.bin";
  c.train.batch_size = 12 / dp;
  c.train.seq_len = 9;
  c.train.steps = 4;
  c.train.warmup_steps = 1;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-2;  // constant after the warm-up: a resumed run's schedule does not depend on train.steps
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
