// The kernel-variant environment variable DT_GDN_NORM_BWD: a value that names no variant stops the
// process with a message naming the valid ones. It is read once per process, so each case runs in a
// fresh one (threadsafe death test) and must exit 1 with the message. Host code
// only: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "kernels/gdn_cuda.h"

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

// Sizes and pointers that pass the argument checks; the variant is read before any launch.
void run_norm_backward_with(const char* value) {
  setenv("DT_GDN_NORM_BWD", value, 1);
  static uint16_t h[64];
  static float f[64];
  GdnCudaNormParams p;
  p.rows = 1, p.H = 1, p.d = 64;
  p.o = p.z = p.dy = h, p.d_o = p.dz = h, p.w = f, p.dw = f;
  exit_like_the_app([&] { gdn_norm_backward_cuda(p, nullptr); });
}

TEST(KernelVariantEnv, UnknownGatedNormBackwardVariantIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_norm_backward_with("7"), ::testing::ExitedWithCode(1),
              "DT_GDN_NORM_BWD='7': expected a gated norm backward variant 0 to 3");
  EXPECT_EXIT(run_norm_backward_with("3x"), ::testing::ExitedWithCode(1), "DT_GDN_NORM_BWD='3x'");
}

}  // namespace
}  // namespace dt
