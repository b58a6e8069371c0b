// Peak memory as the metrics report it: on the CPU the process's peak resident set (VmHWM).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/peak_memory.h"

namespace dt {
namespace {

TEST(PeakMemory, CpuPeakFollowsTheResidentSet) {
  const size_t before = host_peak_resident_bytes();
  ASSERT_GT(before, size_t{1} << 20) << "a process holds more than 1 MiB";
  PeakMemory peak(Device::kCPU);
  peak.sample();  // nothing to sample on the CPU: the kernel keeps the peak
  EXPECT_GE(peak.bytes(), before);
  {
    std::vector<char> block(size_t{96} << 20);
    std::memset(block.data(), 1, block.size());  // touched, so resident
    asm volatile("" : : "r"(block.data()) : "memory");  // and not optimised away
    EXPECT_GE(host_peak_resident_bytes(), before + (size_t{80} << 20));
  }
  // The peak stays after the memory is freed.
  EXPECT_GE(peak.bytes(), before + (size_t{80} << 20));
  EXPECT_NEAR(peak.gib(), static_cast<double>(peak.bytes()) / (1 << 30), 1e-3);
}

}  // namespace
}  // namespace dt
