// `deltatron eval` and `deltatron info` on checkpoints, through the binary: the validation loss of a
// checkpoint equals the run's own, and damaged or mismatched checkpoints are clear errors (exit 1)
// that name the file, the tensor or the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/train_checkpoint.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

std::string quote(const std::string& s) { return "'" + s + "'"; }

// A tiny run of 6 steps with checkpoints (and evaluations) at steps 3 and 6.
class EvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_shards(dir_.str());
    cfg_ = tiny_config(dir_.str());
    cfg_.train.steps = 6;
    cfg_.train.checkpoint_every = 3;
    cfg_.train.eval_every = 3;
    cfg_.run.dir = dir_ / "runs";
    config_ = write_config(dir_ / "tiny.yaml", cfg_);
    RunResult r = run_deltatron("train --config " + quote(config_), dir_.str());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ckpt3_ = dir_ / "runs/tiny/checkpoints/step_00000003.h5";
    ckpt6_ = dir_ / "runs/tiny/checkpoints/step_00000006.h5";
  }
  RunResult eval(const std::string& args) { return run_deltatron("eval " + args, dir_.str()); }
  nlohmann::json eval_json(const std::string& args) {
    RunResult r = eval(args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  // A copy of checkpoint 3 with one byte flipped in its middle.
  std::string corrupted_copy() {
    std::string path = dir_ / "corrupt.h5";
    std::filesystem::copy_file(ckpt3_, path);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(path) / 2);
    f.seekg(middle);
    char byte = 0;
    f.get(byte);
    f.seekp(middle);
    f.put(static_cast<char>(byte ^ 0x01));
    return path;
  }
  // A checkpoint whose stored config is the run's but whose tensors come from a model changed by `edit`.
  std::string mismatched_checkpoint(const std::string& name, void (*edit)(Config&)) {
    Config other = cfg_;
    edit(other);
    Model model(other.model, 1, 1);
    model.init(1);
    AdamW opt(model.params(), {});
    std::string path = dir_ / name;
    save_train_checkpoint(path, cfg_, model.params(), opt, CheckpointState{});
    return path;
  }

  ScratchDir dir_;
  Config cfg_;
  std::string config_, ckpt3_, ckpt6_;
};

TEST_F(EvalCli, ValLossIsTheRunsOwn) {
  std::map<int, double> val = values_by_step(read_metrics(dir_ / "runs/tiny"), "val_loss");
  for (auto [step, path] : {std::pair{3, ckpt3_}, std::pair{6, ckpt6_}}) {
    nlohmann::json j = eval_json("--checkpoint " + quote(path));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["checkpoint"], path);
    EXPECT_EQ(j["step"], step);
    EXPECT_EQ(j["batches"], 2);  // train.eval_batches
    EXPECT_EQ(j["tokens"], 2 * 3 * 20);
    EXPECT_EQ(j["data"], cfg_.data.val);
    EXPECT_TRUE(same_bits(j["val_loss"].get<double>(), val.at(step)))
        << j["val_loss"].get<double>() << " vs " << val.at(step);
  }
  // Plain text.
  RunResult r = eval("--checkpoint " + quote(ckpt6_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(fmt::format("(step 6): val_loss {:.6f} over 2 batches of 3 x 20", val.at(6))),
            std::string::npos)
      << r.out;
  // --batches and --data.
  nlohmann::json one = eval_json("--checkpoint " + quote(ckpt6_) + " --batches 1");
  EXPECT_EQ(one["batches"], 1);
  EXPECT_NE(one["val_loss"], val.at(6));
  nlohmann::json on_train = eval_json("--checkpoint " + quote(ckpt6_) + " --data " + quote(cfg_.data.train));
  EXPECT_EQ(on_train["data"], cfg_.data.train);
  EXPECT_NE(on_train["val_loss"], val.at(6));
  // More batches than the data holds: all of them, with a note.
  r = eval("--checkpoint " + quote(ckpt6_) + " --batches 1000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["batches"], 699 / 20 / 3);  // 34 windows of 20 in 700 tokens
  EXPECT_NE(r.err.find("note: the data holds 11 batches"), std::string::npos) << r.err;
}

TEST_F(EvalCli, BadArgumentsAreClearErrors) {
  expect_cli_error(eval(""), "eval needs --checkpoint FILE");
  expect_cli_error(eval("--checkpoint " + quote(dir_ / "nope.h5")), "nope.h5 does not exist");
  expect_cli_error(eval("--checkpoint " + quote(ckpt6_) + " --batches 0"), "--batches = 0: give a number of batches >= 1");
  expect_cli_error(eval("--checkpoint " + quote(ckpt6_) + " --batches -3"), "--batches = -3");
  expect_cli_error(eval("--checkpoint " + quote(ckpt6_) + " --threads -1"), "--threads = -1");
  expect_cli_error(eval("--checkpoint " + quote(ckpt6_) + " --data " + quote(dir_ / "none_*.bin")),
                   "--data: no shard files match");
  write_text(dir_ / "text.h5", "hello");
  expect_cli_error(eval("--checkpoint " + quote(dir_ / "text.h5")), "is not a Deltatron checkpoint");
}

TEST_F(EvalCli, DamagedCheckpointsAreClearErrors) {
  std::string bad = corrupted_copy();
  expect_cli_error(eval("--checkpoint " + quote(bad)), "corrupt.h5 is corrupted or truncated");
  expect_cli_error(run_deltatron("info " + quote(bad), dir_.str()), "corrupt.h5 is corrupted or truncated");
  std::string cut = dir_ / "cut.h5";
  std::filesystem::copy_file(ckpt3_, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 100);
  expect_cli_error(run_deltatron("info " + quote(cut), dir_.str()), "cut.h5 is corrupted or truncated");
  std::filesystem::resize_file(cut, 100);  // the header itself cut short
  expect_cli_error(run_deltatron("info " + quote(cut), dir_.str()), "is not a Deltatron checkpoint");
  expect_cli_error(eval("--checkpoint " + quote(cut)), "is not a Deltatron checkpoint");
}

TEST_F(EvalCli, AnotherModelsTensorsAreNamed) {
  std::string wider = mismatched_checkpoint("wider.h5", [](Config& c) { c.model.d_model = 40; });
  RunResult r = eval("--checkpoint " + quote(wider));
  expect_cli_error(r, "tensor params/model.");
  EXPECT_NE(r.err.find("has shape"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("40]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("but the model expects"), std::string::npos) << r.err;
  // Resuming from it: the stored config matches, the tensors do not.
  expect_cli_error(run_deltatron("train --config " + quote(config_) + " --run-dir " + quote(dir_ / "r") +
                                     " --resume " + quote(wider),
                                 dir_.str()),
                   "but the model expects");
  std::string fewer = mismatched_checkpoint("fewer.h5", [](Config& c) { c.model.layers = {MixerKind::kGdn}; });
  expect_cli_error(eval("--checkpoint " + quote(fewer)), "tensor params/model.layers.1.");
  std::string more = mismatched_checkpoint(
      "more.h5", [](Config& c) { c.model.layers = {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kGdn}; });
  expect_cli_error(eval("--checkpoint " + quote(more)), "is not part of this model");
}

TEST_F(EvalCli, InfoSummarisesACheckpoint) {
  RunResult r = run_deltatron("info " + quote(ckpt3_), dir_.str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* piece : {"step 3, tokens seen 180", "optimizer steps 3", "/params: 27 tensors",
                            "/optimizer/m: 27 tensors", "checksums OK", "d_model: 32", "valid:      yes"})
    EXPECT_NE(r.out.find(piece), std::string::npos) << piece << " missing from:\n" << r.out;
}

}  // namespace
}  // namespace dt
