// The NaN/Inf policy: a step whose loss or gradient norm is not finite makes no update (weights
// and AdamW's moments keep their bits), still counts, and is marked in metrics.jsonl;
// train.max_skips_in_a_row skips in a row stop the run. Faults are injected through
// TrainOptions::after_backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "core/error.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/train.h"
#include "trainer/train_checkpoint.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Config nan_config(const std::string& dir, int steps) {
  Config cfg = tiny_config(dir);
  cfg.train.steps = steps;
  cfg.train.eval_batches = 0;
  cfg.train.checkpoint_every = 1;
  cfg.train.keep_last = steps;
  return cfg;
}

// A parameter in the middle of the model with more than 5 values (A_log and dt_bias hold only n_v_heads).
int middle_slot(const ParamStore& params) {
  for (int s = params.size() / 2; s < params.size(); ++s)
    if (params.infos()[s].shape.numel() > 5) return s;
  return 0;
}

// Sets one gradient value at each step in `steps`.
TrainOptions poisoning(const std::string& run_dir, std::set<int> steps, float value, int* calls = nullptr) {
  TrainOptions o;
  o.run_dir = run_dir;
  o.console = nullptr;
  o.after_backward = [steps, value, calls](int step, ParamStore& params) {
    if (calls) ++*calls;
    if (steps.count(step)) params.grad(middle_slot(params)).ptr<float>()[5] = value;
  };
  return o;
}

// Parameters and moments of a checkpoint.
struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<AdamW> opt;
  CheckpointState state;
  Loaded(const Config& cfg, const std::string& run_dir, int step)
      : model(std::make_unique<Model>(cfg.model, 1, 1)), opt(std::make_unique<AdamW>(model->params(), AdamWConfig{})) {
    state = load_train_checkpoint(checkpoints_dir(run_dir) + "/" + checkpoint_file_name(step), model->params(), opt.get());
  }
  bool same_bits_as(const Loaded& o) const {
    Arena &a = model->params().params_arena(), &b = o.model->params().params_arena();
    return std::memcmp(a.base(), b.base(), a.bytes()) == 0 &&
           std::memcmp(opt->state().base(), o.opt->state().base(), opt->state().bytes()) == 0;
  }
};

void check_skipped_step(float poison) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = nan_config(dir.str(), 5);
  int calls = 0;
  TrainSummary s = train(cfg, poisoning(dir / "run", {3}, poison, &calls));
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(s.steps, 5);
  EXPECT_EQ(s.skipped_steps, 1);

  std::vector<nlohmann::json> m = read_metrics(dir / "run");
  ASSERT_EQ(m.size(), 5u);
  for (const nlohmann::json& line : m) {
    if (line["step"] == 3) {
      EXPECT_EQ(line["skipped"], true) << line.dump();
      EXPECT_EQ(line["skips_in_a_row"], 1) << line.dump();
      EXPECT_EQ(line["skipped_steps"], 1) << line.dump();
      EXPECT_TRUE(line["grad_norm"].is_null()) << line.dump();  // JSON has no NaN or Inf
      EXPECT_TRUE(line["loss"].is_number()) << line.dump();      // the loss itself was fine
      EXPECT_EQ(line["tokens"], 3 * 60) << line.dump();          // the batch was used up
    } else {
      EXPECT_FALSE(line.contains("skipped")) << line.dump();
      EXPECT_TRUE(std::isfinite(line["grad_norm"].get<double>())) << line.dump();
    }
  }
  std::string log = read_text(dir / "run/log.txt");
  EXPECT_NE(log.find("step 3/5: loss "), std::string::npos) << log;
  EXPECT_NE(log.find("update skipped (1 in a row, 1 in all"), std::string::npos) << log;

  Loaded before(cfg, dir / "run", 2), skipped(cfg, dir / "run", 3), after(cfg, dir / "run", 4);
  EXPECT_TRUE(before.same_bits_as(skipped)) << "the skipped step changed the weights or the moments";
  EXPECT_FALSE(skipped.same_bits_as(after)) << "step 4 should update";
  EXPECT_EQ(before.opt->steps_done(), 2);
  EXPECT_EQ(skipped.opt->steps_done(), 2);  // AdamW's bias correction does not count the skipped step
  EXPECT_EQ(after.opt->steps_done(), 3);
  EXPECT_EQ(skipped.state.step, 3);
  EXPECT_EQ(skipped.state.skipped_steps, 1);
  EXPECT_EQ(skipped.state.skips_in_a_row, 1);
  EXPECT_EQ(after.state.skipped_steps, 1);
  EXPECT_EQ(after.state.skips_in_a_row, 0);
  EXPECT_NE(skipped.state.loader_position, before.state.loader_position);
}

TEST(NanPolicy, NaNGradientSkipsTheUpdate) { check_skipped_step(kNaN); }
TEST(NanPolicy, InfGradientSkipsTheUpdate) { check_skipped_step(kInf); }

TEST(NanPolicy, TooManySkipsInARowStopTheRun) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = nan_config(dir.str(), 8);
  cfg.train.max_skips_in_a_row = 3;
  try {
    train(cfg, poisoning(dir / "run", {2, 3, 4, 5, 6, 7, 8}, kNaN));
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("training stopped at step 4"), std::string::npos) << what;
    EXPECT_NE(what.find("train.max_skips_in_a_row = 3"), std::string::npos) << what;
    EXPECT_NE(what.find("before step 2"), std::string::npos) << what;
  }
  std::vector<nlohmann::json> m = read_metrics(dir / "run");
  ASSERT_EQ(m.size(), 4u);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(m[i]["skips_in_a_row"], i) << m[i].dump();
  EXPECT_FALSE(std::filesystem::exists(checkpoints_dir(dir / "run") + "/" + checkpoint_file_name(4)));
}

TEST(NanPolicy, BrokenStreaksDoNotStopTheRun) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = nan_config(dir.str(), 8);
  cfg.train.max_skips_in_a_row = 3;
  TrainSummary s = train(cfg, poisoning(dir / "run", {2, 3, 5, 6, 8}, kNaN));
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(s.skipped_steps, 5);
}

TEST(NanPolicy, ANonFiniteLossIsSkippedToo) {
  // A NaN weight (set after step 3's backward, so step 3's update spreads it) makes every later loss
  // NaN: those steps are skipped, and the run stops after max_skips_in_a_row of them.
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = nan_config(dir.str(), 10);
  cfg.train.max_skips_in_a_row = 2;
  TrainOptions o;
  o.run_dir = dir / "run";
  o.console = nullptr;
  o.after_backward = [](int step, ParamStore& params) {
    if (step == 3) params.param(middle_slot(params)).ptr<float>()[5] = kNaN;
  };
  EXPECT_THROW(train(cfg, o), Error);
  std::map<int, double> loss = values_by_step(read_metrics(dir / "run"), "loss");
  ASSERT_EQ(loss.size(), 5u);
  EXPECT_TRUE(std::isfinite(loss[3]));
  EXPECT_TRUE(std::isnan(loss[4]));  // written as null
  EXPECT_TRUE(std::isnan(loss[5]));
}

TEST(NanPolicy, SkipCountersSurviveAResume) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = nan_config(dir.str(), 4);
  cfg.train.max_skips_in_a_row = 3;
  TrainSummary s = train(cfg, poisoning(dir / "run", {3, 4}, kNaN));
  EXPECT_EQ(s.skipped_steps, 2);
  cfg.train.steps = 6;
  TrainOptions o = poisoning(dir / "run", {5}, kNaN);
  o.resume = true;
  try {  // steps 3, 4 (before the resume) and 5 make three in a row
    train(cfg, o);
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training stopped at step 5"), std::string::npos) << e.what();
  }
}

TEST(NanPolicy, BadMaxSkipsIsAClearError) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  std::string c = write_config(dir / "c.yaml", tiny_config(dir.str()));
  for (const char* v : {"0", "-1"})
    expect_cli_error(run_deltatron("train --config '" + c + "' --set train.max_skips_in_a_row=" + v, dir.str()),
                     std::string("train.max_skips_in_a_row = ") + v + " must be > 0");
}

}  // namespace
}  // namespace dt
