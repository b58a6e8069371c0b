// validate_config_for_device (trainer/config_validate.h): the GPU kernels' limits on the GDN layers,
// checked with the device given explicitly, so no GPU is needed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "trainer/config.h"
#include "trainer/config_validate.h"

namespace dt {
namespace {

ModelConfig hybrid() {
  ModelConfig m = default_config().model;
  m.layers = {MixerKind::kGdn, MixerKind::kGdn, MixerKind::kAttn};
  return m;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& e : v) s += e + "\n";
  return s;
}

std::string error_of(const ModelConfig& m, Device d, bool training) {
  try {
    validate_config_for_device(m, d, training);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GpuLimits, TheDefaultsFitTheGpu) {
  EXPECT_EQ(joined(device_limit_errors(hybrid(), Device::kCUDA, true)), "");
  EXPECT_EQ(error_of(hybrid(), Device::kCUDA, true), "");
}

TEST(GpuLimits, RecurrenceHasNoGpuBackward) {
  ModelConfig m = hybrid();
  m.gdn.chunk_size = 0;
  const std::string e = error_of(m, Device::kCUDA, /*training=*/true);
  EXPECT_NE(e.find("model.gdn.chunk_size: 0 (the token-by-token recurrence) has no GPU backward; use chunk_size 64 "
                   "or --device cpu"),
            std::string::npos)
      << e;
  // The recurrence's forward runs on the GPU (eval), and both run on the CPU.
  EXPECT_EQ(error_of(m, Device::kCUDA, /*training=*/false), "");
  EXPECT_EQ(error_of(m, Device::kCPU, /*training=*/true), "");
}

TEST(GpuLimits, ChunkSizesAboveTheKernelsAreRefused) {
  ModelConfig m = hybrid();
  for (int chunk : {1, 16, 32, 64}) {
    m.gdn.chunk_size = chunk;
    EXPECT_EQ(error_of(m, Device::kCUDA, true), "") << "chunk_size " << chunk;
  }
  for (int chunk : {65, 128}) {
    m.gdn.chunk_size = chunk;
    for (bool training : {true, false}) {
      const std::string e = error_of(m, Device::kCUDA, training);
      EXPECT_NE(e.find(fmt::format("model.gdn.chunk_size = {}: the GPU kernels take chunks of 1 to 64", chunk)),
                std::string::npos)
          << e;
      EXPECT_NE(e.find("--device cpu"), std::string::npos) << e;
    }
    EXPECT_EQ(error_of(m, Device::kCPU, true), "");
  }
}

TEST(GpuLimits, HeadDimsAndConvolutionWidthsOfTheKernels) {
  ModelConfig m = hybrid();
  // dk may differ from dv: multiples of 8 up to 128 each.
  m.gdn.head_k_dim = 8, m.gdn.head_v_dim = 128, m.gdn.conv_kernel = 8;
  EXPECT_EQ(error_of(m, Device::kCUDA, true), "");
  m.gdn.head_k_dim = 96, m.gdn.head_v_dim = 32, m.gdn.conv_kernel = 1;
  EXPECT_EQ(error_of(m, Device::kCUDA, true), "");
  for (int d : {4, 100, 136, 256}) {
    ModelConfig k = hybrid(), v = hybrid();
    k.gdn.head_k_dim = d, v.gdn.head_v_dim = d;
    const std::string ek = error_of(k, Device::kCUDA, false), ev = error_of(v, Device::kCUDA, false);
    EXPECT_NE(ek.find(fmt::format("model.gdn.head_k_dim = {}: the GPU kernels take head dims that are multiples of 8 "
                                  "up to 128",
                                  d)),
              std::string::npos)
        << ek;
    EXPECT_NE(ev.find(fmt::format("model.gdn.head_v_dim = {}:", d)), std::string::npos) << ev;
    EXPECT_EQ(device_limit_errors(v, Device::kCUDA, false).size(), 1u) << ev;  // head_k_dim 64 passes
    EXPECT_EQ(error_of(k, Device::kCPU, true), "");
  }
  m = hybrid();
  m.gdn.conv_kernel = 9;
  const std::string e = error_of(m, Device::kCUDA, false);
  EXPECT_NE(e.find("model.gdn.conv_kernel = 9: the GPU convolution takes widths of 1 to 8"), std::string::npos) << e;
}

TEST(GpuLimits, EveryBrokenLimitIsListed) {
  ModelConfig m = hybrid();
  m.gdn.chunk_size = 0, m.gdn.head_k_dim = 12, m.gdn.head_v_dim = 192, m.gdn.conv_kernel = 16;
  const std::vector<std::string> errs = device_limit_errors(m, Device::kCUDA, true);
  ASSERT_EQ(errs.size(), 4u) << joined(errs);
  const std::string e = error_of(m, Device::kCUDA, true);
  EXPECT_EQ(e.rfind("config not supported on the GPU:\n  - ", 0), 0u) << e;
  for (const char* key : {"model.gdn.chunk_size", "model.gdn.head_k_dim", "model.gdn.head_v_dim",
                          "model.gdn.conv_kernel"})
    EXPECT_NE(e.find(key), std::string::npos) << key << " missing from: " << e;
}

TEST(GpuLimits, ModelsWithoutGdnLayersAreNotHeldToThem) {
  ModelConfig m = hybrid();
  m.layers = {MixerKind::kAttn, MixerKind::kMla};
  m.gdn.chunk_size = 0, m.gdn.head_k_dim = 12, m.gdn.conv_kernel = 16;
  EXPECT_EQ(error_of(m, Device::kCUDA, true), "");
}

// The constants are the kernels' own: read back from their sources (no CUDA build needed).
int source_constant(const std::string& rel, const std::string& name) {
  std::ifstream in(std::string(DELTATRON_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(in.good()) << "cannot read " << rel;
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::smatch m;
  const std::regex decl("constexpr (?:int|int64_t) " + name + " = ([0-9]+);");
  if (!std::regex_search(text, m, decl)) {
    ADD_FAILURE() << rel << " no longer declares " << name << "; update trainer/config_validate.h";
    return -1;
  }
  return std::stoi(m[1]);
}

TEST(GpuLimits, TheLimitsAreTheKernels) {
  EXPECT_EQ(kGpuGdnMaxChunk, source_constant("kernels/cuda/gdn_chunk.cuh", "kMaxChunk"));
  EXPECT_EQ(kGpuGdnMaxHeadDim, source_constant("kernels/cuda/gdn_chunk.cuh", "kMaxDim"));
  EXPECT_EQ(kGpuGdnHeadDimStep, source_constant("kernels/cuda/gdn_chunk.cuh", "kDimStep"));
  EXPECT_EQ(kGpuGdnMaxConvKernel, source_constant("kernels/cuda/gdn_conv.cu", "kMaxK"));
  // The gated norm over head_v_dim takes more than the chunk kernels, so their limit is the one checked.
  EXPECT_GE(source_constant("kernels/cuda/gdn_norm.cu", "kNormMaxDim"), kGpuGdnMaxHeadDim);
  EXPECT_EQ(kGpuGdnMaxHeadDim % source_constant("kernels/cuda/gdn_norm.cu", "kNormDimStep"), 0);
}

}  // namespace
}  // namespace dt
