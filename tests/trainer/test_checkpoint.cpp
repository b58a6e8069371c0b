#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/sha256.h"
#include "trainer/checkpoint_format.h"

namespace dt {
namespace {

namespace fs = std::filesystem;

struct Buf {
  std::vector<float> data;
  Tensor t;
  Buf(Shape s, float seed) : data(static_cast<size_t>(s.numel())) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = seed + 0.25f * static_cast<float>(i);
    t = Tensor(data.data(), DType::kF32, Device::kCPU, s);
  }
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dt_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "step_000010.h5").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  CheckpointState state() {
    CheckpointState s;
    s.config_yaml = "model:\n  d_model: 8\n";
    s.step = 10;
    s.tokens_seen = 1280;
    s.loader_epoch = 1;
    s.loader_position = 7;
    s.rng_seed = 42;
    s.tp = 1;
    s.dp = 2;
    return s;
  }
  // Rewrites the whole-file checksum in the 512-byte header after a deliberate edit, so that the
  // deeper checks (per-tensor SHA-256, format version) are reached.
  void reseal() {
    std::string header = "DELTATRON-CHECKPOINT\nsha256 " + sha256_file_hex(path_, 512) + "\n";
    header.resize(512, '\0');
    std::FILE* f = std::fopen(path_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fwrite(header.data(), 1, header.size(), f);
    std::fclose(f);
  }
  void save_default() {
    Buf a({3, 4}, 1.0f), b({5}, -2.0f), m({3, 4}, 0.5f);
    checkpoint_save(path_, state(), {{"params", {{"w.a", a.t}, {"w.b", b.t}}}, {"optimizer/m", {{"w.a", m.t}}}});
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(CheckpointTest, RoundTrip) {
  save_default();
  EXPECT_TRUE(fs::exists(path_));
  for (auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string(), path_) << "temporary file left behind";
  CheckpointState s = checkpoint_read_state(path_);
  EXPECT_EQ(s.step, 10);
  EXPECT_EQ(s.tokens_seen, 1280);
  EXPECT_EQ(s.loader_epoch, 1u);
  EXPECT_EQ(s.loader_position, 7u);
  EXPECT_EQ(s.rng_seed, 42u);
  EXPECT_EQ(s.dp, 2);
  EXPECT_EQ(s.config_yaml, state().config_yaml);
  Buf a({3, 4}, 0.0f), b({5}, 0.0f);
  checkpoint_load_group(path_, {"params", {{"w.a", a.t}, {"w.b", b.t}}});
  Buf a_ref({3, 4}, 1.0f), b_ref({5}, -2.0f);
  EXPECT_EQ(a.data, a_ref.data);
  EXPECT_EQ(b.data, b_ref.data);
  auto list = checkpoint_list(path_, "optimizer/m");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, "w.a");
  EXPECT_NE(checkpoint_summary(path_).find("checksums OK"), std::string::npos);
}

TEST_F(CheckpointTest, MismatchedModelIsAClearError) {
  save_default();
  Buf wrong({4, 3}, 0.0f), b({5}, 0.0f), c({2}, 0.0f);
  try {
    checkpoint_load_group(path_, {"params", {{"w.a", wrong.t}, {"w.b", b.t}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("params/w.a has shape [3, 4] but the model expects [4, 3]"), std::string::npos) << e.what();
  }
  Buf a({3, 4}, 0.0f);
  try {  // a tensor the model has but the file lacks
    checkpoint_load_group(path_, {"params", {{"w.a", a.t}, {"w.b", b.t}, {"w.c", c.t}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("params/w.c is missing"), std::string::npos) << e.what();
  }
  try {  // a tensor the file has but the model lacks
    checkpoint_load_group(path_, {"params", {{"w.a", a.t}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("params/w.b is not part of this model"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, CorruptionIsDetected) {
  save_default();
  // Flip one byte in the middle of w.b's data: find its float pattern and change it.
  std::vector<char> bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  float needle = -2.0f + 0.25f * 3;  // w.b[3]
  auto it = std::search(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&needle), reinterpret_cast<char*>(&needle) + 4);
  ASSERT_NE(it, bytes.end());
  it[1] ^= 0x10;
  {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Buf a({3, 4}, 0.0f), b({5}, 0.0f);
  try {  // the whole-file checksum catches it before HDF5 parses anything
    checkpoint_load_group(path_, {"params", {{"w.a", a.t}, {"w.b", b.t}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupted or truncated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(checkpoint_summary(path_), Error);
  reseal();  // a consistent header over corrupted data: the per-tensor checksum names the tensor
  try {
    checkpoint_load_group(path_, {"params", {{"w.a", a.t}, {"w.b", b.t}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w.b fails its SHA-256 check"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, TruncatedAndForeignFilesAreClearErrors) {
  save_default();
  auto size = fs::file_size(path_);
  fs::resize_file(path_, size / 2);
  try {
    checkpoint_read_state(path_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupted or truncated"), std::string::npos) << e.what();
  }
  Buf a({3, 4}, 0.0f), b({5}, 0.0f);
  EXPECT_THROW(checkpoint_load_group(path_, {"params", {{"w.a", a.t}, {"w.b", b.t}}}), Error);
  std::ofstream(dir_ / "text.h5") << "not a checkpoint";
  try {
    checkpoint_read_state((dir_ / "text.h5").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a Deltatron checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_THROW(checkpoint_read_state((dir_ / "missing.h5").string()), Error);
}

TEST_F(CheckpointTest, WrongFormatVersionIsRejected) {
  save_default();
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t attr = H5Aopen(f, "format_version", H5P_DEFAULT);
  int64_t v = 99;
  H5Awrite(attr, H5T_NATIVE_INT64, &v);
  H5Aclose(attr);
  H5Fclose(f);
  reseal();
  try {
    checkpoint_read_state(path_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 99 is not supported"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, FailedSaveKeepsThePreviousCheckpoint) {
  save_default();
  auto before = fs::file_size(path_);
  Buf a({3, 4}, 9.0f);
  // A duplicate name fails half-way through writing the new file.
  EXPECT_THROW(checkpoint_save(path_, state(), {{"params", {{"w.a", a.t}, {"w.a", a.t}}}}), Error);
  EXPECT_EQ(fs::file_size(path_), before);
  for (auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string(), path_) << "temporary file left behind";
  Buf a2({3, 4}, 0.0f), b2({5}, 0.0f);
  checkpoint_load_group(path_, {"params", {{"w.a", a2.t}, {"w.b", b2.t}}});
  EXPECT_EQ(a2.data[0], 1.0f);
}

}  // namespace
}  // namespace dt
