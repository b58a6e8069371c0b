// The kernel-variant environment variable (DT_CE_VARIANT): a value that names no variant stops the
// process with a message naming the valid ones. It is read once per process,
// so each case runs in a fresh one (threadsafe death test) and must exit 1 with the message. Host code
// only: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "kernels/cuda/dense_mm_launch.h"

namespace dt {
namespace {

// f() in the child process: an exception's message to stderr and exit 1, as `deltatron` reports it.
template <class F>
void exit_like_the_app(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(1);
  }
  std::exit(0);
}

void read_cross_entropy_variant(const char* value) {
  setenv("DT_CE_VARIANT", value, 1);
  exit_like_the_app([] { dense_mm_cuda::cross_entropy_variant(); });
}

TEST(KernelVariantEnv, UnknownCrossEntropyVariantIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(read_cross_entropy_variant("fastest"), ::testing::ExitedWithCode(1),
               "DT_CE_VARIANT=fastest is not a cross-entropy variant; set it to stream, regs or tma");
}

}  // namespace
}  // namespace dt
