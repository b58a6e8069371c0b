// train.save_optimizer: false writes weights-only checkpoints: eval and info read them, --resume
// refuses them with a clear message.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "trainer/checkpoint_format.h"
#include "trainer/config.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(WeightsOnly, EvalReadsThemAndResumeRefusesThem) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 4;
  cfg.train.checkpoint_every = 4;
  const std::string full_cfg = write_config(dir / "full.yaml", cfg);
  cfg.train.save_optimizer = false;
  const std::string light_cfg = write_config(dir / "light.yaml", cfg);
  for (const auto& [c, run] : {std::pair{full_cfg, dir / "full"}, std::pair{light_cfg, dir / "light"}}) {
    const RunResult r = run_deltatron("train --config " + q(c) + " --run-dir " + q(run), dir.str());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string full = dir / "full/checkpoints/step_00000004.h5", light = dir / "light/checkpoints/step_00000004.h5";
  EXPECT_TRUE(checkpoint_has_group(full, "optimizer/m"));
  EXPECT_FALSE(checkpoint_has_group(light, "optimizer/m"));
  EXPECT_LT(std::filesystem::file_size(light) * 2, std::filesystem::file_size(full));

  RunResult r = run_deltatron("eval --checkpoint " + q(light) + " --batches 1", dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_deltatron("info " + q(light), dir.str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("valid:      yes"), std::string::npos) << r.out;
  r = run_deltatron("train --config " + q(light_cfg) + " --run-dir " + q(dir / "light") + " --resume", dir.str());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("holds the weights only (written with train.save_optimizer: false)"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dt
