// A model that cannot fit is refused before allocation, naming the keys that size it.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "trainer/config.h"
#include "trainer/memory_check.h"

namespace dt {
namespace {

TEST(MemoryCheck, EstimateCountsStateAndActivations) {
  const Config c = default_config();
  const MemoryEstimate train = estimate_memory(c.model, 4, 64, 1, 1, false, true);
  const MemoryEstimate eval = estimate_memory(c.model, 4, 64, 1, 1, false, false);
  EXPECT_GT(train.parameters, 100'000'000);
  EXPECT_EQ(train.state_bytes, static_cast<uint64_t>(16 * train.parameters));
  EXPECT_EQ(eval.state_bytes, static_cast<uint64_t>(4 * eval.parameters));
  EXPECT_GT(train.activation_bytes, eval.activation_bytes);
  const MemoryEstimate tp2 = estimate_memory(c.model, 4, 64, 2, 1, false, true);
  EXPECT_LT(tp2.state_bytes, train.state_bytes);
}

TEST(MemoryCheck, AHugeModelIsRefusedNamingTheKeys) {
  Config c = default_config();
  c.model.vocab_size = 50304;
  c.model.d_model = 1'000'000'000;
  try {
    check_memory_fits(c.model, 1, 16, 1, 1, false, true, Device::kCPU, available_memory(Device::kCPU));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the model does not fit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.d_model"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host"), std::string::npos) << msg;
  }
}

// Evaluation (trainer/evaluate.cpp) cannot change the checkpoint's model or batch: its refusal says
// where to evaluate instead, not which keys to lower.
TEST(MemoryCheck, EvaluationIsToldWhereToRun) {
  const Config c = default_config();
  try {
    check_memory_fits(c.model, 8, 64, 1, 1, false, /*training=*/false, Device::kCUDA, uint64_t{1} << 20);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the model does not fit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("8 x 64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the GPU has 0.0 GiB available"), std::string::npos) << msg;
    EXPECT_NE(msg.find("evaluate where more memory is free (another GPU, or --device cpu)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("lower model.d_model"), std::string::npos) << msg;
  }
}

TEST(MemoryCheck, ASmallModelFits) {
  const Config c = default_config();
  EXPECT_NO_THROW(check_memory_fits(c.model, 1, 16, 1, 1, false, true, Device::kCPU, uint64_t{64} << 30));
  EXPECT_THROW(check_memory_fits(c.model, 1, 16, 1, 1, false, true, Device::kCPU, uint64_t{1} << 20), Error);
  EXPECT_GT(available_memory(Device::kCPU), 0u);
}

}  // namespace
}  // namespace dt
