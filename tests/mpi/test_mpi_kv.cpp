// Fewer attention KV heads than TP ranks (KV heads replicated, layers/attention.h) under mpirun: a
// hybrid GDN + GQA + MLA step at TP = 2 and 4 with n_kv_heads = 1 and 2 gives the loss and every
// gradient of TP = 1 within 1e-5 relative (fp32); the trainer's curve (loss and gradient norm, which
// must count the replicated k_proj / v_proj once) repeats the one-process one; a checkpoint saved with
// replicated KV heads resumes under TP = 1 and back.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "layers/model.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/mpi/mpi_train_util.h"
#include "trainer/config.h"

namespace dt::mpitest {
namespace {

// GDN (Hv = 2 Hk, 4 key heads: whole heads on up to 4 ranks), gated GQA with q/k norms and 8 query
// heads over `kv_heads` KV heads, MLA; attention first and last, untied.
ModelConfig kv_config(int kv_heads) {
  ModelConfig m = small_hybrid_config(/*tied=*/false, /*q_lora_rank=*/12);
  m.layers = {MixerKind::kAttn, MixerKind::kGdn, MixerKind::kMla, MixerKind::kAttn};
  m.attn.n_kv_heads = kv_heads;
  return m;
}

// One forward and backward at TP = tp (groups of `tp` adjacent world ranks) against one process.
void check_kv_step(int kv_heads, int tp) {
  if (world().size() % tp != 0) return;
  SCOPED_TRACE(fmt::format("n_kv_heads {}, tp {}", kv_heads, tp));
  const TpStep step(kv_config(kv_heads), tp, /*data_seed=*/73, /*init_seed=*/9);
  EXPECT_LE(std::abs(step.loss - step.ref_loss), 1e-5 * std::abs(step.ref_loss)) << step.loss << " vs "
                                                                                  << step.ref_loss;
  const ParamStore& ps = step.model.params();
  ASSERT_EQ(ps.size(), step.ref.params().size());
  int replicated_kv = 0;
  for (int s = 0; s < ps.size(); ++s) {
    const ParamInfo& info = ps.infos()[s];
    ASSERT_EQ(info.name, step.ref.params().infos()[s].name);
    const bool kv = info.name.find("k_proj") != std::string::npos || info.name.find("v_proj") != std::string::npos;
    replicated_kv += kv && info.split == TpSplit::kReplicated;
    const std::vector<float> want = step.part_of(s, step.ref.params().grad(s));
    EXPECT_LE(rel_err(ps.grad(s).ptr<float>(), want.data(), info.shape.numel()), 1e-5)
        << "rank " << step.group->rank() << ": gradient of " << info.name;
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

// The shards' tokens (other than the other tests').
uint16_t kv_train_token(size_t i) { return static_cast<uint16_t>((11 * i + (i / 7) * 5) % 63); }
uint16_t kv_val_token(size_t i) { return static_cast<uint16_t>((3 * i + 1) % 63); }

// TP = tp on tp ranks, one KV head; a global batch of 4, a constant learning rate after the warm-up,
// clipping on (the norm must count the replicated KV projections once), no evaluation, a checkpoint
// every 2 steps.
Layout kv_layout(const SharedRunDir& dir, int tp) {
  Config c = small_train_config(dir, tp, /*dp=*/1, /*global_batch=*/4);
  c.model = kv_config(1);
  c.train.eval_every = 0;
  c.train.eval_batches = 0;
  c.train.checkpoint_every = 2;
  return {c, tp};
}

// TP = world size with one KV head (replicated on every rank): the one-process curve; saved there and
// resumed under TP = 1, and saved under TP = 1 and resumed there: the straight run's losses.
TEST(MpiKvReplication, TrainerCurveAndResumeAcrossLayouts) {
  const int n = world().size();
  SharedRunDir dir("kv", {kv_train_token, kv_val_token});
  const std::string straight = run(dir, "straight", kv_layout(dir, 1));
  const std::string tp_run = run(dir, "tp", kv_layout(dir, n));
  if (world().rank() == 0) {
    expect_metric(tp_run, straight, "loss", 1e-5, fmt::format("tp {}", n));
    expect_metric(tp_run, straight, "grad_norm", 1e-4, fmt::format("tp {}", n));
  }
  world().barrier();
  const std::pair<int, int> cases[] = {{n, 1}, {1, n}};  // (save layout, resume layout)
  for (auto [save, load] : cases) {
    const std::string resumed = run_and_resume(dir, fmt::format("save{}_load{}", save, load), kv_layout(dir, save),
                                               /*save_steps=*/2, kv_layout(dir, load));
    if (world().rank() == 0)
      expect_metric(resumed, straight, "loss", 1e-5, fmt::format("saved at tp {}, resumed at tp {}", save, load));
    world().barrier();
  }
}

}  // namespace
}  // namespace dt::mpitest
