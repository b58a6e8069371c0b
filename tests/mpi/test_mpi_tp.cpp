// Tensor parallelism inside the layers and data parallelism in the trainer against one process
// (docs/architecture.md, "Tests"): the same step of a hybrid GDN + GQA + MLA model under TP = world size gives
// the loss and every gradient of TP = 1 within 1e-5 relative (fp32); whole training runs under
// every TP x DP layout of the world repeat the single-process curve, and a checkpoint saved under
// one layout resumes under another.
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

// One forward and backward of a TP = tp model (a TP group of `tp` adjacent world ranks) against the
// same step of a one-process model on every rank (small_hybrid_config: its sizes split over 1, 2
// and 4 ranks; TpStep: odd T, a partial GDN chunk).
void check_tp_step(const ModelConfig& cfg, int tp) {
  if (world().size() % tp != 0) return;
  const TpStep step(cfg, tp, /*data_seed=*/71, /*init_seed=*/5);
  EXPECT_LE(std::abs(step.loss - step.ref_loss), 1e-5 * std::abs(step.ref_loss))
      << "tp " << tp << ": " << step.loss << " vs " << step.ref_loss;
  const ParamStore& ps = step.model.params();
  ASSERT_EQ(ps.size(), step.ref.params().size());
  int split = 0;
  for (int s = 0; s < ps.size(); ++s) {
    const ParamInfo& info = ps.infos()[s];
    ASSERT_EQ(info.name, step.ref.params().infos()[s].name);
    EXPECT_EQ(info.full_shape, step.ref.params().infos()[s].shape) << info.name;
    split += info.shape.numel() != info.full_shape.numel();
    const std::vector<float> want = step.part_of(s, step.ref.params().grad(s));
    const double e = rel_err(ps.grad(s).ptr<float>(), want.data(), info.shape.numel());
    EXPECT_LE(e, 1e-5) << "tp " << tp << " rank " << step.group->rank() << ": gradient of " << info.name;
    // The parts start from the one-process model's values.
    const std::vector<float> param = step.part_of(s, step.ref.params().master(s));
    EXPECT_EQ(rel_err(ps.master(s).ptr<float>(), param.data(), info.shape.numel()), 0.0) << info.name;
  }
  if (tp > 1) {
    EXPECT_GT(split, 20) << "the layers hold their parts";
  }
}

TEST(MpiTensorParallel, HybridStepMatchesOneProcess) {
  for (int tp : {2, 4}) check_tp_step(small_hybrid_config(/*tied=*/true, /*q_lora_rank=*/12), tp);
}

TEST(MpiTensorParallel, UntiedHeadAndDirectMlaQuery) {
  for (int tp : {2, 4}) check_tp_step(small_hybrid_config(/*tied=*/false, /*q_lora_rank=*/0), tp);
}

// ---- the trainer ----

constexpr int kGlobalBatch = 4;  // sequences per step for every layout (kGlobalBatch / dp per DP rank)

// Every TP x DP layout of the world gives the one-process curve (loss, gradient norm, val loss),
// under a decaying learning rate.
TEST(MpiTrainer, EveryLayoutRepeatsTheOneProcessCurve) {
  SharedRunDir dir("layouts");
  auto layout = [&](int tp, int dp) {
    Config c = small_train_config(dir, tp, dp, kGlobalBatch);
    c.train.min_lr = 1e-3;
    return Layout{c, tp * dp};
  };
  const std::string ref = run(dir, "ref", layout(1, 1));
  for (int tp = 1; tp <= world().size(); tp *= 2) {
    const int dp = world().size() / tp;
    const std::string got = run(dir, fmt::format("tp{}_dp{}", tp, dp), layout(tp, dp));
    if (world().rank() == 0) {
      const std::string what = fmt::format("tp {} x dp {}", tp, dp);
      expect_metric(got, ref, "loss", 1e-5, what);
      expect_metric(got, ref, "grad_norm", 1e-4, what);
      expect_metric(got, ref, "val_loss", 1e-5, what);
    }
    world().barrier();
  }
}

// Saved under one layout, resumed under another: the same curve as one straight run.
TEST(MpiTrainer, ResumeAcrossLayouts) {
  SharedRunDir dir("resume");
  const int n = world().size();
  // small_train_config's constant learning rate after the warm-up: the schedule then does not
  // depend on train.steps.
  auto layout = [&](std::pair<int, int> tp_dp) {
    Config c = small_train_config(dir, tp_dp.first, tp_dp.second, kGlobalBatch);
    c.train.checkpoint_every = 2;  // a resume must match the checkpoint's train keys
    return Layout{c, tp_dp.first * tp_dp.second};
  };
  const std::string straight = run(dir, "straight", layout({1, 1}));
  // (save layout, resume layout): TP = n to TP = 1 and back. (DP cannot change on resume: the
  // per-rank train.batch_size must match the checkpoint's.)
  const std::pair<std::pair<int, int>, std::pair<int, int>> cases[] = {{{n, 1}, {1, 1}}, {{1, 1}, {n, 1}}};
  int k = 0;
  for (auto [save, load] : cases) {
    const std::string resumed =
        run_and_resume(dir, fmt::format("case{}", k++), layout(save), /*save_steps=*/2, layout(load));
    if (world().rank() == 0) {
      const std::string what = fmt::format("saved at tp {} x dp {}, resumed at tp {} x dp {}", save.first,
                                           save.second, load.first, load.second);
      expect_metric(resumed, straight, "loss", 1e-5, what);
    }
    world().barrier();
  }
}

}  // namespace
}  // namespace dt::mpitest
