// What every GPU suite shares: the skip without a device, the run's random seed and its trace,
// and a context on the GPU's legacy default stream.
//
// Inputs are fresh each run; the seed is in every failure's trace, and DT_TEST_SEED=<n> replays it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "core/context.h"
#include "core/device.h"

#define SKIP_WITHOUT_GPU()                                                         \
  do {                                                                             \
    if (::dt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

#define SEED_TRACE() \
  SCOPED_TRACE("seed " + std::to_string(::dt::gpu_testing::run_seed()) + " (replay: DT_TEST_SEED=<seed>)")

namespace dt::gpu_testing {

inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("DT_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(e, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

inline Context gpu_context() {
  Context ctx;
  ctx.device = Device::kCUDA;  // stream = nullptr: the legacy default stream
  return ctx;
}

}  // namespace dt::gpu_testing
