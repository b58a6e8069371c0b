// End to end: a tiny hybrid trained for a few steps on shards written here. Checks the run
// directory (config.yaml, metrics.jsonl, log.txt), the metrics' content, and that the same
// config and seed give bitwise identical losses.
#include <regex>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/device.h"
#include "core/error.h"
#include "trainer/schedule.h"
#include "trainer/train.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

TrainOptions quiet(const std::string& run_dir) {
  TrainOptions o;
  o.run_dir = run_dir;
  o.console = nullptr;
  return o;
}

std::vector<double> losses(const std::vector<nlohmann::json>& metrics, const char* key) {
  std::vector<double> v;
  for (const nlohmann::json& m : metrics)
    if (m.contains(key)) v.push_back(m[key].get<double>());
  return v;
}

TEST(Train, TinyRunWritesTheRunDirectory) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  std::string run = dir / "run";
  TrainSummary s = train(cfg, quiet(run));
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(s.run_dir, run);

  std::vector<nlohmann::json> m = read_metrics(run);
  // 8 train lines, and evaluations after steps 3, 6 and the last (8).
  std::vector<int> train_steps, eval_steps;
  for (const nlohmann::json& line : m) {
    if (line.contains("loss")) {
      train_steps.push_back(line["step"]);
      for (const char* key : {"lr", "grad_norm", "tokens", "tokens_per_s", "time_s", "peak_mem_gib"})
        EXPECT_TRUE(line.contains(key)) << key << " missing from " << line.dump();
      // On the CPU the process's peak resident set: more than the binary and the model, far below 1 TiB.
      EXPECT_GT(line["peak_mem_gib"].get<double>(), 1.0 / 1024);
      EXPECT_LT(line["peak_mem_gib"].get<double>(), 1024.0);
      int step = line["step"];
      EXPECT_EQ(line["tokens"].get<int64_t>(), int64_t{step} * 3 * 20);
      EXPECT_DOUBLE_EQ(line["lr"].get<double>(), lr_at_step(step, 8, 2, 1e-2, 1e-3));
      EXPECT_TRUE(std::isfinite(line["loss"].get<double>()));
      EXPECT_GT(line["grad_norm"].get<double>(), 0.0);
    } else {
      ASSERT_TRUE(line.contains("val_loss")) << line.dump();
      eval_steps.push_back(line["step"]);
    }
  }
  EXPECT_EQ(train_steps, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(eval_steps, (std::vector<int>{3, 6, 8}));
  std::vector<double> loss = losses(m, "loss"), val = losses(m, "val_loss");
  EXPECT_NEAR(loss[0], std::log(64.0), 0.5);  // a fresh model is close to uniform over the vocabulary
  EXPECT_LT(loss.back(), loss.front());        // and learns something in 8 steps at lr 1e-2
  EXPECT_EQ(s.first_loss, loss.front());
  EXPECT_EQ(s.last_loss, loss.back());
  EXPECT_EQ(s.val_loss, val.back());

  // config.yaml is the resolved config, and loads back to the same one.
  EXPECT_TRUE(config_equal(load_config(run + "/config.yaml"), cfg));
  std::string log = read_text(run + "/log.txt");
  EXPECT_NE(log.find("step 8/8 | loss "), std::string::npos) << log;
  EXPECT_NE(log.find("eval step 3/8 | val_loss "), std::string::npos) << log;
  EXPECT_NE(log.find("parameters: "), std::string::npos) << log;  // the model summary
  EXPECT_EQ(log.find("step 3/8 | loss"), std::string::npos) << "only every log_every = 2 steps: " << log;
  // The progress line: grad norm, peak memory, elapsed time and ETA; no MFU on the CPU.
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(Z step 8/8 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| grad [0-9.e+-]+ \| )"
                                                R"([0-9.KMG]+ tok/s \| mem [0-9.]+ GiB \| [0-9hms]+ \| ETA 0s)")))
      << log;
  EXPECT_EQ(log.find("MFU"), std::string::npos) << log;
  // log.txt: every line after its UTC time.
  EXPECT_TRUE(std::regex_search(log, std::regex(R"((^|\n)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z step 8/8 \| loss)")))
      << log;
}

TEST(Train, SameSeedGivesBitwiseIdenticalLosses) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 5;
  cfg.train.eval_every = 0;  // only at the end
  train(cfg, quiet(dir / "a"));
  train(cfg, quiet(dir / "b"));
  std::vector<double> a = losses(read_metrics(dir / "a"), "loss"), b = losses(read_metrics(dir / "b"), "loss");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << "step " << i + 1 << ": " << a[i] << " vs " << b[i];
  EXPECT_EQ(losses(read_metrics(dir / "a"), "val_loss"), losses(read_metrics(dir / "b"), "val_loss"));
  // Another seed gives other losses (so the comparison above can fail).
  cfg.train.seed += 1;
  train(cfg, quiet(dir / "c"));
  EXPECT_NE(losses(read_metrics(dir / "c"), "loss"), a);
}

TEST(Train, RefusesToOverwriteAnEarlierRun) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 1;
  cfg.train.warmup_steps = 0;
  train(cfg, quiet(dir / "run"));
  try {
    train(cfg, quiet(dir / "run"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already holds metrics.jsonl"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--overwrite"), std::string::npos) << e.what();
  }
  TrainOptions o = quiet(dir / "run");
  o.overwrite = true;
  EXPECT_NO_THROW(train(cfg, o));
  EXPECT_EQ(losses(read_metrics(dir / "run"), "loss").size(), 1u);  // replaced, not appended
}

TEST(Train, ClearErrorsBeforeAnythingIsWritten) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  auto expect_error = [&](Config cfg, const std::string& piece) {
    try {
      train(cfg, quiet(dir / "never"));
      ADD_FAILURE() << "no error, expected " << piece;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "never")) << piece;
  };
  Config c = tiny_config(dir.str());
  c.data.train = dir / "nothing_*.bin";
  expect_error(c, "data.train: no shard files match");
  c = tiny_config(dir.str());
  c.data.val = dir / "nothing_*.bin";
  expect_error(c, "data.val: no shard files match");
  c = tiny_config(dir.str());
  c.model.vocab_size = 50;  // the shards hold ids up to 60
  expect_error(c, "50");
  c = tiny_config(dir.str());
  c.run.device = "cuda";
  if (cuda_device_count() == 0) expect_error(c, "device cuda: ");  // no CUDA build, or no GPU
  c = tiny_config(dir.str());
  c.parallel.tp = 2;
  c.model.attn.n_kv_heads = 2;
  c.model.gdn.n_k_heads = 2;
  expect_error(c, "parallel.tp = 2");
}

}  // namespace
}  // namespace dt
