// libFuzzer target: the token-shard reader. Any byte string must either parse or raise
// dt::Error; ASan/UBSan turn an out-of-bounds read or undefined behaviour into a crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "data/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    auto tokens = dt::parse_shard(bytes, "fuzz.bin", 50257);
    (void)dt::shard_stats(tokens);
  } catch (const dt::Error&) {
  }
  return 0;
}
