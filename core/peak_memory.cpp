#include "core/peak_memory.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "core/device.h"

namespace dt {

void PeakMemory::sample() {
  if (device_ == Device::kCUDA) device_peak_ = std::max(device_peak_, device_memory_used());
}

size_t PeakMemory::bytes() const { return device_ == Device::kCUDA ? device_peak_ : host_peak_resident_bytes(); }

size_t host_peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;  // "VmHWM:    123456 kB"
    try {
      return static_cast<size_t>(std::stoull(line.substr(6))) * 1024;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace dt
