// The GPU's device memory calls (core/device.h): running out is a clear error, and the device stays
// usable after it.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "tests/gpu/gpu_testing.h"

namespace dt {
namespace {

TEST(DeviceCuda, OutOfMemoryNamesTheSizeAndWhatToDo) {
  SKIP_WITHOUT_GPU();
  std::string msg;
  try {
    device_alloc(size_t{1} << 50, Device::kCUDA);  // 1 PiB: more than any GPU has
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("out of GPU memory: 1048576.00 GiB asked for"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GiB free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--batch"), std::string::npos) << msg;
  // The failed allocation leaves no error behind: the next allocation and a kernel-free copy work.
  void* p = device_alloc(4096, Device::kCUDA);
  const int32_t in = 12345;
  int32_t out = 0;
  device_copy(p, Device::kCUDA, &in, Device::kCPU, sizeof(in));
  device_copy(&out, Device::kCPU, p, Device::kCUDA, sizeof(out));
  device_free(p, Device::kCUDA);
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace dt
