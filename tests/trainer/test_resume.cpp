// Checkpoints in the training loop and exact resume, through the `deltatron` binary:
//   - 2N straight steps give bitwise the losses of N steps, a stop, a resume and N more;
//   - SIGKILL at many moments (some inside a save) leaves only valid checkpoints, and resuming
//     after each kill still reproduces the straight run bit for bit;
//   - what a checkpoint holds; keep_last; every bad --resume / checkpoint setting is a clear error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "layers/model.h"
#include "trainer/checkpoint_format.h"
#include "trainer/train.h"
#include "trainer/train_checkpoint.h"
#include "child_process.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

std::string quote(const std::string& s) { return "'" + s + "'"; }

// `deltatron train --config <cfg> --run-dir <run> <extra>`; expects success.
void train_cli(const ScratchDir& dir, const std::string& cfg, const std::string& run, const std::string& extra = "") {
  RunResult r = run_deltatron("train --config " + quote(cfg) + " --run-dir " + quote(run) + " " + extra, dir.str());
  ASSERT_EQ(r.exit_code, 0) << "train " << extra << ":\n" << r.err;
}

TEST(Resume, StopAndResumeIsBitwiseTheStraightRun) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());  // cosine schedule, warmup 2, eval every 3
  cfg.train.steps = 8;
  std::string straight = write_config(dir / "straight.yaml", cfg);
  train_cli(dir, straight, dir / "a");

  // Run B: the same run saving every 4 steps, "killed" after the checkpoint at step 4: what a kill
  // leaves is the checkpoints and metrics up to then, plus metrics lines of steps the checkpoint
  // does not hold. Emulated exactly by deleting the later checkpoint; the SIGKILL test below does
  // it for real.
  cfg.train.checkpoint_every = 4;
  std::string saving = write_config(dir / "saving.yaml", cfg);
  train_cli(dir, saving, dir / "b");
  std::filesystem::remove(dir / "b/checkpoints/step_00000008.h5");
  std::ofstream(dir / "b/metrics.jsonl", std::ios::app) << R"({"step":9,"loss":3.)";  // a line cut short by a kill
  RunResult r = run_deltatron("train --config " + quote(saving) + " --run-dir " + quote(dir / "b") + " --resume",
                              dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming from " + dir / "b/checkpoints/step_00000004.h5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dropped 6 lines after step 4"), std::string::npos) << r.err;  // 4 train + 2 eval
  EXPECT_NE(r.err.find("dropped 1 unreadable lines"), std::string::npos) << r.err;

  std::vector<nlohmann::json> a = read_metrics(dir / "a"), b = read_metrics(dir / "b");
  expect_same_bits(values_by_step(a, "loss"), values_by_step(b, "loss"), "loss");
  expect_same_bits(values_by_step(a, "val_loss"), values_by_step(b, "val_loss"), "val_loss");
  expect_same_bits(values_by_step(a, "grad_norm"), values_by_step(b, "grad_norm"), "grad_norm");
  EXPECT_EQ(values_by_step(b, "loss").size(), 8u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {  // the same lines in the same order, tokens included
    EXPECT_EQ(a[i]["step"], b[i]["step"]) << i;
    EXPECT_EQ(a[i]["tokens"], b[i]["tokens"]) << i;
  }
  // log.txt is appended to: both segments are in it.
  std::string log = read_text(dir / "b/log.txt");
  EXPECT_NE(log.find("step 1/8 | loss"), std::string::npos) << log;
  EXPECT_NE(log.find("resuming from"), std::string::npos) << log;
  // The checkpoints of both runs at step 8 hold the same bits.
  std::string ca = dir / "b/checkpoints/step_00000008.h5";
  ASSERT_TRUE(std::filesystem::exists(ca));
  cfg.train.checkpoint_every = 8;
  train_cli(dir, write_config(dir / "every8.yaml", cfg), dir / "c");
  Model ma(cfg.model, 1, 1), mc(cfg.model, 1, 1);
  load_train_checkpoint(ca, ma.params(), nullptr);
  load_train_checkpoint(dir / "c/checkpoints/step_00000008.h5", mc.params(), nullptr);
  Arena &pa = ma.params().params_arena(), &pc = mc.params().params_arena();
  EXPECT_EQ(std::memcmp(pa.base(), pc.base(), pa.bytes()), 0);
}

TEST(Resume, ExtendingAFinishedRun) {
  // N steps, then --resume with train.steps = 2N: with a schedule that does not depend on the
  // run's length (constant after the warmup) that is the straight 2N-step run, bit for bit.
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.min_lr = cfg.train.lr;
  cfg.train.steps = 6;
  cfg.train.eval_every = 0;
  train_cli(dir, write_config(dir / "long.yaml", cfg), dir / "a");
  cfg.train.steps = 3;
  cfg.train.checkpoint_every = 3;
  std::string short_cfg = write_config(dir / "short.yaml", cfg);
  train_cli(dir, short_cfg, dir / "b");
  train_cli(dir, short_cfg, dir / "b", "--resume --set train.steps=6");
  // The eval after step 3 (the end of the first run) is the one extra line.
  std::vector<nlohmann::json> a = read_metrics(dir / "a"), b = read_metrics(dir / "b");
  expect_same_bits(values_by_step(a, "loss"), values_by_step(b, "loss"), "loss");
  EXPECT_EQ(values_by_step(b, "val_loss").size(), 2u);
  // Resuming a finished run again is not an error: there is nothing left to do.
  RunResult r = run_deltatron("train --config " + quote(short_cfg) + " --run-dir " + quote(dir / "b") +
                                  " --resume --set train.steps=6",
                              dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("nothing to train"), std::string::npos) << r.err;
  EXPECT_EQ(read_metrics(dir / "b").size(), b.size());
  // Without --config the checkpoint's own config is used.
  r = run_deltatron("train --run-dir " + quote(dir / "b") + " --resume --set train.steps=7", dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(values_by_step(read_metrics(dir / "b"), "loss").size(), 7u);
}

TEST(Resume, CheckpointHoldsTheWholeState) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 5;
  cfg.train.checkpoint_every = 1;
  cfg.train.keep_last = 2;
  cfg.data.shuffle = false;  // so the cursor is easy to predict
  TrainOptions o;
  o.run_dir = dir / "run";
  o.console = nullptr;
  train(cfg, o);
  std::vector<CheckpointFile> files = list_checkpoints(checkpoints_dir(o.run_dir));
  ASSERT_EQ(files.size(), 2u) << "keep_last = 2";
  EXPECT_EQ(files[0].step, 4);
  EXPECT_EQ(files[1].step, 5);
  EXPECT_EQ(std::filesystem::path(files[1].path).filename(), "step_00000005.h5");
  CheckpointState s = checkpoint_read_state(files[1].path);
  EXPECT_EQ(s.step, 5);
  EXPECT_EQ(s.tokens_seen, 5 * 3 * 20);
  EXPECT_EQ(s.optimizer_steps, 5);
  EXPECT_EQ(s.skipped_steps, 0);
  EXPECT_EQ(s.loader_epoch, 0u);
  EXPECT_EQ(s.loader_position, 5u * 3);  // 3 windows per step
  EXPECT_EQ(s.rng_seed, cfg.train.seed);
  EXPECT_EQ(s.tp, 1);
  EXPECT_EQ(s.dp, 1);
  Config stored = parse_config(s.config_yaml);
  EXPECT_TRUE(config_equal(stored, cfg)) << s.config_yaml;
  Model model(cfg.model, 1, 1);
  std::vector<std::string> names;
  for (const ParamInfo& info : model.params().infos()) names.push_back(info.name);
  std::sort(names.begin(), names.end());
  for (const char* group : {"params", "optimizer/m", "optimizer/v"}) {
    std::vector<std::string> in_file;
    for (auto& [name, shape] : checkpoint_list(files[1].path, group)) {
      in_file.push_back(name);
      EXPECT_EQ(shape, model.params().param(name).shape) << group << "/" << name;
    }
    std::sort(in_file.begin(), in_file.end());
    EXPECT_EQ(in_file, names) << group;
  }
  // The moments are AdamW's: after 5 steps they are not zero.
  AdamW opt(model.params(), {});
  load_train_checkpoint(files[1].path, model.params(), &opt);
  EXPECT_EQ(opt.steps_done(), 5);
  double v_sum = 0;
  for (int i = 0; i < model.params().size(); ++i)
    for (int64_t j = 0; j < opt.v(i).numel(); ++j) v_sum += opt.v(i).ptr<float>()[j];
  EXPECT_GT(v_sum, 0.0);
}

TEST(Resume, BadResumeAndCheckpointSettingsAreClearErrors) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 4;
  cfg.train.checkpoint_every = 2;
  cfg.train.eval_batches = 0;
  std::string c = write_config(dir / "c.yaml", cfg);
  std::string train_c = "train --config " + quote(c) + " --run-dir ";

  // Keys with wrong values.
  expect_cli_error(run_deltatron(train_c + quote(dir / "x") + " --set train.checkpoint_every=-1", dir.str()),
                   "train.checkpoint_every = -1 must be >= 0");
  expect_cli_error(run_deltatron(train_c + quote(dir / "x") + " --set train.keep_last=-2", dir.str()),
                   "train.keep_last = -2 must be >= 0");
  expect_cli_error(run_deltatron(train_c + quote(dir / "x") + " --set train.keep_last=0", dir.str()),
                   "train.keep_last = 0 must be >= 1 when train.checkpoint_every = 2 > 0");
  expect_cli_error(run_deltatron(train_c + quote(dir / "x") + " --set train.checkpoint_every=often", dir.str()),
                   "train.checkpoint_every must be an integer, got 'often'");
  // checkpoint_every = 0 makes keep_last irrelevant, so 0 is fine there.
  EXPECT_EQ(run_deltatron(train_c + quote(dir / "x") + " --set train.checkpoint_every=0 --set train.keep_last=0",
                          dir.str())
                .exit_code,
            0);
  EXPECT_FALSE(std::filesystem::exists(dir / "x/checkpoints"));

  // --resume with nothing to resume from.
  expect_cli_error(run_deltatron(train_c + quote(dir / "none") + " --resume", dir.str()), "no checkpoint in");
  expect_cli_error(run_deltatron(train_c + quote(dir / "x") + " --resume", dir.str()), "no checkpoint in");
  expect_cli_error(run_deltatron(train_c + quote(dir / "r") + " --resume " + quote(dir / "missing.h5"), dir.str()),
                   "missing.h5 does not exist");
  write_text(dir / "junk.h5", "not a checkpoint at all");
  expect_cli_error(run_deltatron(train_c + quote(dir / "r") + " --resume " + quote(dir / "junk.h5"), dir.str()),
                   "is not a Deltatron checkpoint");
  expect_cli_error(run_deltatron("train --resume", dir.str()), "--resume without --config needs");
  expect_cli_error(run_deltatron(train_c + quote(dir / "r") + " --resume --overwrite", dir.str()),
                   "--resume and --overwrite contradict");

  // A finished run with checkpoints at steps 2 and 4.
  train_cli(dir, c, dir / "r");
  std::string ck2 = dir / "r/checkpoints/step_00000002.h5", ck4 = dir / "r/checkpoints/step_00000004.h5";
  // A fresh run does not silently replace it; --overwrite deletes its checkpoints.
  expect_cli_error(run_deltatron(train_c + quote(dir / "r"), dir.str()), "--overwrite");
  // Another model, another schedule: each differing key is named with both values.
  RunResult r = run_deltatron(train_c + quote(dir / "r") + " --resume --set train.steps=6 --set model.d_model=48",
                              dir.str());
  expect_cli_error(r, "model.d_model is 32 in the checkpoint but 48 now");
  r = run_deltatron(train_c + quote(dir / "r") + " --resume --set train.steps=6 --set train.lr=0.5 --set "
                                                  "data.shuffle=false",
                    dir.str());
  expect_cli_error(r, "train.lr is 0.01 in the checkpoint but 0.5 now");
  EXPECT_NE(r.err.find("data.shuffle is true in the checkpoint but false now"), std::string::npos) << r.err;
  // Fewer steps than the checkpoint has done.
  expect_cli_error(run_deltatron(train_c + quote(dir / "r") + " --resume --set train.steps=3", dir.str()),
                   "is at step 4, past train.steps = 3");
  // An older checkpoint while a newer one exists would mix two histories.
  expect_cli_error(run_deltatron(train_c + quote(dir / "r") + " --resume " + quote(ck2), dir.str()),
                   "already holds a later checkpoint");
  // A damaged newest checkpoint: named, with what to do.
  {
    std::fstream f(ck4, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(ck4) / 2);
    f.seekg(middle);
    char byte = 0;
    f.get(byte);
    f.seekp(middle);
    f.put(static_cast<char>(byte ^ 0x40));
  }
  r = run_deltatron(train_c + quote(dir / "r") + " --resume --set train.steps=6", dir.str());
  expect_cli_error(r, "step_00000004.h5 is corrupted or truncated");
  EXPECT_NE(r.err.find("delete it"), std::string::npos) << r.err;
  std::filesystem::remove(ck4);
  r = run_deltatron(train_c + quote(dir / "r") + " --resume --set train.steps=6", dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming from " + ck2), std::string::npos) << r.err;

  // --overwrite starts over and deletes the earlier checkpoints.
  write_text(dir / "r/checkpoints/step_00000099.h5", "stale");
  r = run_deltatron(train_c + quote(dir / "r") + " --overwrite --set train.checkpoint_every=0", dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(list_checkpoints(dir / "r/checkpoints").empty());
}

// ---- SIGKILL at many moments ----

bool has_partial(const std::string& ckpt_dir) { return !list_partial_checkpoints(ckpt_dir).empty(); }

TEST(Resume, SurvivesSigkillAtAnyMoment) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  // About a million parameters: a checkpoint is ~10 MB and a save takes tens of ms, long enough
  // to be killed inside one; a step takes a few tens of ms on one thread.
  Config cfg = tiny_config(dir.str());
  cfg.model.d_model = 192;
  cfg.model.d_ff = 512;
  cfg.model.attn = {.n_heads = 4, .n_kv_heads = 2, .head_dim = 48, .rotary_dim = 16, .rope_theta = 10000.0,
                    .qk_norm = true, .output_gate = true};
  cfg.model.gdn.n_k_heads = 2;
  cfg.model.gdn.n_v_heads = 4;
  cfg.model.gdn.head_k_dim = 48;
  cfg.model.gdn.head_v_dim = 48;
  cfg.model.gdn.chunk_size = 16;
  cfg.train.batch_size = 2;
  cfg.train.seq_len = 32;
  cfg.train.steps = 14;
  cfg.train.warmup_steps = 2;
  cfg.train.lr = 3e-3;
  cfg.train.min_lr = 3e-4;
  cfg.train.eval_every = 4;
  cfg.train.eval_batches = 2;
  train_cli(dir, write_config(dir / "straight.yaml", cfg), dir / "a");

  cfg.train.checkpoint_every = 1;
  cfg.train.keep_last = 2;
  const std::string c = write_config(dir / "crash.yaml", cfg), run = dir / "b",
                    ckpt_dir = checkpoints_dir(run);
  using clock = std::chrono::steady_clock;
  // When to kill each launch: ms after a save's temporary file appears (-1: a fixed time after
  // the start, in a step or before the first one; -2: right after a new checkpoint appears).
  const std::vector<int> kill_plan = {0, -1, 3, 12, -2, 25, 1, -1, 6};
  int killed_inside_save = 0, launches = 0;
  for (size_t k = 0; k < kill_plan.size(); ++k) {
    const bool have_checkpoint = !list_checkpoints(ckpt_dir).empty();
    std::vector<std::string> args = {"train", "--config", c, "--run-dir", run};
    if (have_checkpoint) args.push_back("--resume");
    else if (std::filesystem::exists(run)) args.push_back("--overwrite");  // killed before its first checkpoint
    Child child(args, dir / fmt::format("launch{}.txt", k));
    ++launches;
    const int plan = kill_plan[k];
    const size_t n_before = list_checkpoints(ckpt_dir).size();
    const int64_t newest_before = n_before ? list_checkpoints(ckpt_dir).back().step : -1;
    const auto t0 = clock::now();
    bool fired = false;
    while (child.running() && clock::now() - t0 < std::chrono::seconds(20)) {
      if (plan == -1) {
        fired = clock::now() - t0 > std::chrono::milliseconds(150 + 40 * static_cast<int>(k));
      } else if (plan == -2) {
        auto files = list_checkpoints(ckpt_dir);
        fired = !files.empty() && files.back().step > newest_before;
      } else if (has_partial(ckpt_dir)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(plan));
        fired = true;
      }
      if (fired) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!child.running()) {
      ASSERT_TRUE(child.exited_ok()) << read_text(dir / fmt::format("launch{}.txt", k));
      break;  // the run finished before this kill
    }
    child.kill_now();
    if (has_partial(ckpt_dir)) ++killed_inside_save;
    // Every checkpoint present is complete and valid.
    for (const CheckpointFile& f : list_checkpoints(ckpt_dir)) {
      try {
        checkpoint_summary(f.path);
        EXPECT_EQ(checkpoint_read_state(f.path).step, f.step);
      } catch (const Error& e) {
        ADD_FAILURE() << "after kill " << k << ": " << e.what();
      }
    }
  }
  RecordProperty("launches", launches);
  RecordProperty("killed_inside_save", killed_inside_save);
  EXPECT_GE(launches, 5);
  EXPECT_GE(killed_inside_save, 2) << "no kill landed inside a save; the model may be too small to catch one";
  // The last launch runs to the end.
  std::vector<std::string> args = {"train", "--config", c, "--run-dir", run};
  if (!list_checkpoints(ckpt_dir).empty()) args.push_back("--resume");
  else args.push_back("--overwrite");
  {
    Child last(args, dir / "last.txt");
    while (last.running()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(last.exited_ok()) << read_text(dir / "last.txt");
  }
  EXPECT_FALSE(has_partial(ckpt_dir));
  std::vector<nlohmann::json> a = read_metrics(dir / "a"), b = read_metrics(run);
  expect_same_bits(values_by_step(a, "loss"), values_by_step(b, "loss"), "loss");
  expect_same_bits(values_by_step(a, "val_loss"), values_by_step(b, "val_loss"), "val_loss");
  EXPECT_EQ(values_by_step(b, "loss").size(), 14u);
  std::vector<CheckpointFile> left = list_checkpoints(ckpt_dir);
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.back().step, 14);
  EXPECT_LE(left.size(), 3u);  // keep_last = 2, plus one if a kill landed between a save and its pruning
}

}  // namespace
}  // namespace dt
