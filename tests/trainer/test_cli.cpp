// `deltatron train` from the command line: bad input exits 1 with `deltatron: error: ...` on
// stderr, --print-config prints a config that reads back, and a tiny run works end to end.
#include <gtest/gtest.h>

#include "core/error.h"
#include "trainer/config.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

void expect_failure(const RunResult& r, const std::string& piece) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("deltatron: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(piece), std::string::npos) << "expected '" << piece << "' in: " << r.err;
}

TEST(TrainCli, MissingConfigFile) {
  ScratchDir dir;
  expect_failure(run_deltatron("train --config " + dir / "nope.yaml", dir.str()), "nope.yaml' not found");
}

TEST(TrainCli, NoConfigGiven) {
  ScratchDir dir;
  expect_failure(run_deltatron("train", dir.str()), "train needs --config FILE");
}

TEST(TrainCli, UnknownKey) {
  ScratchDir dir;
  write_text(dir / "c.yaml", "model:\n  d_model: 64\n  atn:\n    n_heads: 2\n");
  RunResult r = run_deltatron("train --config " + dir / "c.yaml", dir.str());
  expect_failure(r, "c.yaml:3: unknown key 'model.atn'");
  EXPECT_NE(r.err.find("Did you mean 'model.attn'"), std::string::npos) << r.err;
}

TEST(TrainCli, BadSet) {
  ScratchDir dir;
  write_text(dir / "c.yaml", "train:\n  steps: 10\n  warmup_steps: 1\n");
  std::string c = "train --config " + dir / "c.yaml";
  expect_failure(run_deltatron(c + " --set train.lr=fast", dir.str()), "train.lr must be a finite number, got 'fast'");
  expect_failure(run_deltatron(c + " --set train.lr", dir.str()), "expected key.path=value");
  expect_failure(run_deltatron(c + " --set train.learning_rate=1", dir.str()), "unknown key 'train.learning_rate'");
  expect_failure(run_deltatron(c + " --set train.warmup_steps=11", dir.str()),
                 "train.warmup_steps = 11 must be <= train.steps = 10");
}

TEST(TrainCli, MissingDataFiles) {
  ScratchDir dir;
  write_text(dir / "c.yaml", "data:\n  train: " + dir / "missing_*.bin" + "\n");
  expect_failure(run_deltatron("train --config " + dir / "c.yaml", dir.str()), "data.train: no shard files match");
}

TEST(TrainCli, PrintConfig) {
  ScratchDir dir;
  RunResult r = run_deltatron("train --print-config", dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(config_equal(parse_config(r.out), default_config())) << r.out;
  write_text(dir / "c.yaml", "train:\n  steps: 77\n  warmup_steps: 7\n");
  r = run_deltatron("train --config " + dir / "c.yaml" + " --set 'model.layers=\"[gdn, mla] * 2\"' --print-config",
                    dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Config c = parse_config(r.out);
  EXPECT_EQ(c.train.steps, 77);
  EXPECT_EQ(c.model.n_layers(), 4);
  EXPECT_EQ(c.run.name, "c");  // from the file name
}

TEST(TrainCli, TinyRunAndNoSilentOverwrite) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 2;
  cfg.train.warmup_steps = 1;
  cfg.run.dir = dir / "runs";
  write_text(dir / "tiny.yaml", config_to_yaml(cfg));
  RunResult r = run_deltatron("train --config " + dir / "tiny.yaml", dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step 2/2 | loss "), std::string::npos) << r.err;  // progress goes to stderr
  EXPECT_EQ(read_metrics(dir / "runs/tiny").size(), 3u);                // 2 steps + 1 evaluation
  expect_failure(run_deltatron("train --config " + dir / "tiny.yaml", dir.str()), "--overwrite");
  r = run_deltatron("train --config " + dir / "tiny.yaml --overwrite --set train.steps=1 --set train.warmup_steps=0",
                    dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_metrics(dir / "runs/tiny").size(), 2u);
  // --run-dir overrides run.dir / run.name.
  r = run_deltatron("train --config " + dir / "tiny.yaml --run-dir " + dir / "elsewhere", dir.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "elsewhere/config.yaml"));
}

}  // namespace
}  // namespace dt
