// checkpoint_check_structure: what eval and --resume reject, found without a model (`deltatron
// info` runs it), and the header and cursor checks of checkpoint_read_state.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "layers/model.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/checkpoint_check.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"
#include "trainer/evaluate.h"

namespace dt {
namespace {

namespace fs = std::filesystem;
using namespace trainer_testing;

class CheckpointCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dt_ckpt_check_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "step_000001.h5").string();
    cfg_ = tiny_config(dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Saves the tiny model's parameters and moments; `edit` may change the list of (name, shape) first.
  void save(const std::function<void(std::vector<std::pair<std::string, Shape>>&)>& edit = nullptr,
            int64_t loader_epoch = 0) {
    std::vector<std::pair<std::string, Shape>> list;
    for (const ParamInfo& p : Model::param_infos(cfg_.model)) list.emplace_back(p.name, p.shape);
    if (edit) edit(list);
    std::vector<NamedTensor> tensors;
    for (auto& [name, shape] : list) {
      bufs_.push_back(std::make_unique<std::vector<float>>(static_cast<size_t>(shape.numel()), 0.5f));
      tensors.push_back({name, Tensor(bufs_.back()->data(), DType::kF32, Device::kCPU, shape)});
    }
    CheckpointState s;
    s.config_yaml = config_to_yaml(cfg_);
    s.step = 1;
    s.optimizer_steps = 1;
    s.loader_epoch = static_cast<uint64_t>(loader_epoch);
    checkpoint_save(path_, s, {{"params", tensors}, {"optimizer/m", tensors}, {"optimizer/v", tensors}});
  }

  std::string error() {
    try {
      checkpoint_check_structure(path_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::string path_;
  Config cfg_;
  std::vector<std::unique_ptr<std::vector<float>>> bufs_;
};

TEST_F(CheckpointCheck, AGoodFilePassesAndListsItsTensors) {
  save();
  EXPECT_EQ(error(), "");
  const auto tensors = checkpoint_tensors(path_);
  EXPECT_EQ(tensors.size(), 3 * Model::param_infos(cfg_.model).size());
  EXPECT_EQ(tensors.front().dtype, "float32");
  EXPECT_EQ(tensors.front().name.rfind("params/", 0), 0u);
}

TEST_F(CheckpointCheck, WrongShapeMissingAndExtraTensorsAreFound) {
  save([](auto& list) { list[0].second = Shape{3, 3}; });
  EXPECT_NO_THROW(checkpoint_summary(path_)) << "the checksums alone are fine";
  EXPECT_NE(error().find("has shape [3, 3] but the model expects"), std::string::npos) << error();
  save([](auto& list) { list.pop_back(); });
  EXPECT_NE(error().find("is missing"), std::string::npos) << error();
  save([](auto& list) { list.emplace_back("extra.weight", Shape{2}); });
  EXPECT_NE(error().find("tensor params/extra.weight is not part of this model"), std::string::npos) << error();
}

TEST_F(CheckpointCheck, NegativeLoaderEpochIsRefused) {
  save(nullptr, -3);
  try {
    checkpoint_read_state(path_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loader_epoch -3"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointCheck, HeaderPaddingMustBeZero) {
  save();
  std::FILE* f = std::fopen(path_.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 300, SEEK_SET);
  std::fputc('x', f);
  std::fclose(f);
  try {
    checkpoint_read_state(path_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged header"), std::string::npos) << e.what();
  }
}

// `deltatron info CKPT` says valid only when the structure is, and --tensors lists the tensors.
TEST_F(CheckpointCheck, InfoRunsTheSameChecks) {
  save();
  RunResult r = run_deltatron("info --tensors '" + path_ + "'", dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("params/model.embed_tokens.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid:      yes"), std::string::npos) << r.out;
  save([](auto& list) { list[0].second = Shape{3, 3}; });
  r = run_deltatron("info '" + path_ + "'", dir_.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("has shape [3, 3] but the model expects"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("valid:      yes"), std::string::npos) << r.out;
  r = run_deltatron("info --tensors '" + dir_.string() + "/x.yaml'", dir_.string());
  EXPECT_EQ(r.exit_code, 1);
}

// eval applies the loader's manifest rule to its glob, as the stored config's data.require_manifest says.
TEST_F(CheckpointCheck, EvalRefusesAGlobWithoutAManifest) {
  write_tiny_shards(dir_.string());
  fs::remove(dir_ / "tiny.manifest.json");
  save();
  CheckpointEvalOptions o;
  o.device = "cpu";
  try {
    evaluate_checkpoint(path_, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.require_manifest: false"), std::string::npos) << e.what();
  }
  write_manifest((dir_ / "tiny.manifest.json").string(), manifest_of_files(dir_.string(), "tiny"));
  EXPECT_GT(evaluate_checkpoint(path_, o).batches, 0);
}

}  // namespace
}  // namespace dt
