// libFuzzer target: the safetensors reader (io/safetensors.h). Any byte string must either parse
// or raise dt::Error; ASan/UBSan turn an out-of-bounds read or undefined behaviour into a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dt::SafetensorsFile f = dt::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size),
                                                  "fuzz.safetensors");
    (void)f;
  } catch (const dt::Error&) {
  }
  return 0;
}
