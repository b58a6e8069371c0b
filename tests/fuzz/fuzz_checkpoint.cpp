// libFuzzer target: the checkpoint reader (header, checksum, attributes, tensor table).
// The input is written to a file and read back through every public reader; each must
// return or raise dt::Error. With FUZZ_RESEAL=1 the whole-file checksum is rewritten to
// match the mutated bytes first, so the fuzzer also reaches the HDF5-facing code.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/sha256.h"
#include "trainer/checkpoint_format.h"

namespace {

void reseal(std::string& bytes) {
  if (bytes.size() < 512) return;
  std::string header = "DELTATRON-CHECKPOINT\nsha256 " + dt::sha256_hex(bytes.data() + 512, bytes.size() - 512) + "\n";
  header.resize(512, '\0');
  bytes.replace(0, 512, header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/dt_fuzz_ckpt_" + std::to_string(::getpid()) + ".h5";
  static const bool do_reseal = std::getenv("FUZZ_RESEAL") != nullptr;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (do_reseal) reseal(bytes);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  try {
    (void)dt::checkpoint_read_state(path);
    (void)dt::checkpoint_list(path, "params");
    (void)dt::checkpoint_summary(path);
  } catch (const dt::Error&) {
  }
  return 0;
}
